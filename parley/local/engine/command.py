"""``parley engine serve``: the local engines (eSpeak NG speech, PocketSphinx transcription)
as their own server, speaking OpenAI's audio API (``parley.local.engine``; docs/engine.md).

Needs the ``local`` extra: ``pip install 'parley[local]'``.
"""

from __future__ import annotations

import logging

import click
from aiohttp import web


@click.group()
def engine() -> None:
    """The local speech and transcription engine."""


@engine.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8091, show_default=True)
@click.option(
    "--recognizers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Transcription threads (each loads its own PocketSphinx model).",
)
def serve(host: str, port: int, recognizers: int) -> None:
    """Serve /v1/audio/speech, /v1/audio/voices, /v1/audio/transcriptions and translations."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        from parley.local.engine.app import create_engine_app
        from parley.local.engine.espeak import Espeak, SynthesisError

        espeak = Espeak.from_wheel()
    except ImportError as error:
        if error.name not in ("espeakng_loader", "pocketsphinx"):
            raise
        raise click.ClickException(
            f"the local engines are not installed ({error.name} is missing): "
            "pip install 'parley[local]'"
        ) from None
    except SynthesisError as error:
        raise click.ClickException(str(error)) from None
    app = create_engine_app(espeak, recognizers)
    logging.getLogger("parley.local.engine").info(
        "parley engine serving on http://%s:%d/v1 (speech: espeak-ng, transcription: "
        "pocketsphinx-en-us)",
        host,
        port,
    )
    web.run_app(app, host=host, port=port, print=None, access_log=None)
