"""The CPU one large body costs its caller: the body processes' work, called here.

Builds the body ``bench.big_body`` sends for ``--route`` (``--mib`` MiB of same-role
items of ``--text`` characters, each content a list of one text block with ``--blocks``)
and reads it as the body processes do, in this process (no server, no upstream): a
Responses body read (``read_apart``); a chat body read
(``read_chat_apart``) and translated for Anthropic from the body the reading kept
(``translate_kept``); a Messages body read (``read_messages_apart``) and translated to
an OpenAI chat body. Prints the CPU and wall seconds of each step and the load average;
with ``--profile`` the same steps again under cProfile, their costliest functions.

    python -m bench.body_cost                    # from the repo root
    python -m bench.body_cost --route chat-anthropic --profile 20
    python -m bench.body_cost --route messages-openai --blocks

Figures, not a test.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time
from collections.abc import Callable
from typing import Any

from bench.big_body import ROUTES, big_body
from parley.api.apart import read_chat_apart, read_messages_apart, translate_kept
from parley.api.responses_apart import read_apart
from parley.dialects.outbound import Codec
from parley.runtime.body_pool import uncollected

Step = tuple[str, Callable[..., Any], tuple[Any, ...]]


def steps(route: str, raw: bytes) -> list[Step]:
    """The body processes' calls for one body on ``route``, in order."""
    if route == "responses":
        return [("read", read_apart, (raw, 1))]
    if route == "chat-anthropic":
        anthropic = Codec("anthropic", 4096)
        return [
            ("read", read_chat_apart, (raw, 20 * 1024 * 1024, "kept")),
            ("translate", translate_kept, ("kept", "chat", anthropic, False)),
        ]
    if route == "messages-anthropic":
        return [("read", read_messages_apart, (raw, None, False))]
    return [
        ("read", read_messages_apart, (raw, None, False, "kept")),
        ("translate", translate_kept, ("kept", "messages", None, False)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--route", choices=tuple(ROUTES), default="responses")
    parser.add_argument("--mib", type=float, default=24.9, help="the body's size")
    parser.add_argument("--text", type=int, default=11, help="characters in each item")
    parser.add_argument(
        "--blocks", action="store_true", help="each content a list of one text block"
    )
    parser.add_argument("--profile", type=int, default=0, help="print N costliest functions")
    args = parser.parse_args()
    raw = big_body(args.route, args.mib, args.text, args.blocks)
    for name, function, call in steps(args.route, raw):
        cpu, wall = time.process_time(), time.monotonic()
        uncollected(function, call)
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
        load = ", ".join(f"{each:.1f}" for each in os.getloadavg())
        shape = " --blocks" if args.blocks else ""
        print(
            f"{args.route}{shape} {name}, {len(raw):,} bytes: {cpu:.2f} s CPU, "
            f"{wall:.2f} s wall (load average {load})"
        )
    if args.profile:  # the steps again, in order (a translation takes what the read kept)
        for name, function, call in steps(args.route, raw):
            print(f"{args.route} {name}, profiled:")
            profile = cProfile.Profile()
            profile.runcall(uncollected, function, call)
            pstats.Stats(profile).sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()
