"""llama.cpp's OpenAI server for the demo, with its extra CPU buffer types turned off.

    python -m parley.local.demo.llama_server --model FILE [llama_cpp.server's options]

Runs ``python -m llama_cpp.server`` with the same arguments, after one change to the
model parameters every model is loaded with: ``use_extra_bufts = False``. llama.cpp's
CPU backend then keeps the weights as the file has them instead of repacking them for
its special kernels. On a CPU with AMX (Intel Sapphire Rapids and later), llama.cpp
built natively by pip (llama-cpp-python 0.3.36) loads SmolLM2's weights into its AMX
buffers and its first generation dies in ``ggml_backend_amx_mul_mat`` (SIGSEGV), so
every demo chat call was a 502. The plain CPU kernels answer the same; for a 135M model
the repacking's speed-up is not worth a crash on some machines, so it is off on all
of them and the demo runs one code path everywhere.
"""

from __future__ import annotations

import importlib
import runpy
from typing import Any


def without_extra_buffer_types() -> None:
    """Make every model llama-cpp-python loads from now on skip the extra buffer types."""
    low: Any = importlib.import_module("llama_cpp.llama_cpp")
    defaults = low.llama_model_default_params

    def params() -> Any:
        chosen = defaults()
        chosen.use_extra_bufts = False
        return chosen

    low.llama_model_default_params = params


def main() -> None:
    without_extra_buffer_types()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
