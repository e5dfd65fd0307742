"""The /v1 route table.

The endpoints of text generation (chat, completions, Messages, Responses, embeddings)
and the model list are imported with the app. Every other endpoint (batches, files,
images, audio, voices, realtime, stored responses, moderations, rerank, billing) is
registered as ``deferred("parley.api.<module>:<function>")``, a handler whose module is
imported by the first request that reaches it (``parley.edge.deferred``): a worker that
never serves them never carries them, nor what they import (the cascade, the audio
parts). ``parley.app`` passes ``deferred`` in, so ``api`` does not import ``edge``.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from aiohttp.typedefs import Handler

from parley.api import chat, completions, embeddings, messages, models, responses


def api_routes(deferred: Callable[[str], Handler]) -> list[web.RouteDef]:
    """The ``/v1`` routes (and ``/v2/rerank``), for ``parley.app`` to add behind its edge."""
    return [
        web.post("/v1/chat/completions", chat.create_chat_completion),
        web.post("/v1/completions", completions.create_completion),
        web.post("/v1/messages", messages.create_message),
        web.post("/v1/messages/count_tokens", messages.count_tokens),
        web.post(
            "/v1/messages/batches", deferred("parley.api.message_batches:create_message_batch")
        ),
        web.get(
            "/v1/messages/batches", deferred("parley.api.message_batches:list_message_batches")
        ),
        web.get(
            "/v1/messages/batches/{batch_id}",
            deferred("parley.api.message_batches:retrieve_message_batch"),
        ),
        web.delete(
            "/v1/messages/batches/{batch_id}",
            deferred("parley.api.message_batches:delete_message_batch"),
        ),
        web.post(
            "/v1/messages/batches/{batch_id}/cancel",
            deferred("parley.api.message_batches:cancel_message_batch"),
        ),
        web.get(
            "/v1/messages/batches/{batch_id}/results",
            deferred("parley.api.message_batches:message_batch_results"),
        ),
        web.post("/v1/responses", responses.create_response),
        web.get(
            "/v1/responses/{response_id}",
            deferred("parley.api.stored_responses:retrieve_response"),
        ),
        web.delete(
            "/v1/responses/{response_id}",
            deferred("parley.api.stored_responses:delete_response"),
        ),
        web.get(
            "/v1/responses/{response_id}/input_items",
            deferred("parley.api.stored_responses:list_input_items"),
        ),
        web.post("/v1/embeddings", embeddings.create_embeddings),
        web.post("/v1/moderations", deferred("parley.api.moderations:create_moderation")),
        web.post("/v1/rerank", deferred("parley.api.rerank:rerank_v1")),
        web.post("/v2/rerank", deferred("parley.api.rerank:rerank_v2")),
        web.post("/v1/images/generations", deferred("parley.api.images:create_generation")),
        web.post("/v1/images/edits", deferred("parley.api.images:create_edit")),
        web.get("/v1/images/files/{image_id}", deferred("parley.api.image_files:retrieve_image")),
        web.post("/v1/batches", deferred("parley.api.batches:create_batch")),
        web.get("/v1/batches", deferred("parley.api.batches:list_batches")),
        web.get("/v1/batches/{batch_id}", deferred("parley.api.batches:retrieve_batch")),
        web.post("/v1/batches/{batch_id}/cancel", deferred("parley.api.batches:cancel_batch")),
        web.post("/v1/files", deferred("parley.api.files:create_file")),
        web.get("/v1/files", deferred("parley.api.files:list_files")),
        web.get("/v1/files/{file_id}", deferred("parley.api.files:retrieve_file")),
        web.delete("/v1/files/{file_id}", deferred("parley.api.files:delete_file")),
        web.get("/v1/files/{file_id}/content", deferred("parley.api.files:file_content")),
        web.get("/v1/realtime", deferred("parley.api.realtime:realtime_session")),
        web.post(
            "/v1/realtime/client_secrets",
            deferred("parley.api.client_secrets:create_client_secret"),
        ),
        web.get("/v1/models", models.list_models),
        web.get("/v1/models/{model:.+}", models.retrieve_model),
        web.get("/v1/capabilities", models.list_capabilities),
        web.get("/v1/dashboard/billing/quota", deferred("parley.api.billing:quota")),
        web.get("/v1/dashboard/billing/usage", deferred("parley.api.billing:usage")),
        web.get("/v1/dashboard/billing/subscription", deferred("parley.api.billing:subscription")),
        web.post(
            "/v1/audio/transcriptions",
            deferred("parley.api.transcriptions:create_transcription"),
        ),
        web.post(
            "/v1/audio/translations", deferred("parley.api.transcriptions:create_translation")
        ),
        web.post("/v1/audio/speech", deferred("parley.api.speech:create_speech")),
        web.get("/v1/audio/voices", deferred("parley.api.voices:list_voices")),
        web.post("/v1/audio/voices", deferred("parley.api.voice_clones:create_voice")),
        web.delete("/v1/audio/voices/{voice_id}", deferred("parley.api.voice_clones:delete_voice")),
    ]
