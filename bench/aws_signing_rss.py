"""What a worker's memory gains by signing Bedrock requests and reading their frames
with Parley's own modules, against botocore's (the reason botocore is not a runtime
dependency: docs/development.md, Bedrock).

Each measure runs in a fresh interpreter that first imports ``parley.app`` (what a
worker holds anyway), reads ``VmRSS``, imports one candidate, and reads it again:

- ``ours``: ``parley/providers/bedrock/sigv4.py`` and ``parley/dialects/eventstream.py``,
  loaded from their files alone (in a worker they are already loaded by the registry);
- ``botocore-signer``: ``botocore.auth``, ``botocore.credentials``,
  ``botocore.awsrequest`` and ``botocore.eventstream``, what the same work would import;
- ``botocore-client``: a whole ``bedrock-runtime`` client from a botocore session.

    python -m bench.aws_signing_rss            # needs botocore (the test extras)
    python -m bench.aws_signing_rss --runs 5
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = ("ours", "botocore-signer", "botocore-client")
PROBE = """
import importlib.util, sys
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
import parley.app
what = sys.argv[1]
before = rss()
if what == "ours":
    for name, path in (("sigv4_alone", "parley/providers/bedrock/sigv4.py"),
                       ("eventstream_alone", "parley/dialects/eventstream.py")):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
elif what == "botocore-signer":
    import botocore.auth, botocore.credentials, botocore.awsrequest, botocore.eventstream
else:
    import botocore.session
    botocore.session.get_session().create_client(
        "bedrock-runtime", region_name="us-east-1",
        aws_access_key_id="AKIAEXAMPLE", aws_secret_access_key="example")
print(rss() - before)
"""


def measure(candidate: str) -> int:
    """KiB of RSS the candidate's imports added, in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, candidate],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    for candidate in CANDIDATES:
        figures = sorted(measure(candidate) for _ in range(runs))
        print(f"{candidate:16} +{figures[len(figures) // 2]:>6} KiB (median of {runs})")


if __name__ == "__main__":
    main()
