"""The /v1 route table."""

from __future__ import annotations

from aiohttp import web

from parley.api import (
    batches,
    billing,
    chat,
    client_secrets,
    completions,
    embeddings,
    files,
    image_files,
    images,
    message_batches,
    messages,
    models,
    moderations,
    realtime,
    rerank,
    responses,
    speech,
    stored_responses,
    transcriptions,
    voice_clones,
    voices,
)


def add_routes(app: web.Application) -> None:
    app.router.add_routes(
        [
            web.post("/v1/chat/completions", chat.create_chat_completion),
            web.post("/v1/completions", completions.create_completion),
            web.post("/v1/messages", messages.create_message),
            web.post("/v1/messages/count_tokens", messages.count_tokens),
            web.post("/v1/messages/batches", message_batches.create_message_batch),
            web.get("/v1/messages/batches", message_batches.list_message_batches),
            web.get("/v1/messages/batches/{batch_id}", message_batches.retrieve_message_batch),
            web.delete("/v1/messages/batches/{batch_id}", message_batches.delete_message_batch),
            web.post(
                "/v1/messages/batches/{batch_id}/cancel", message_batches.cancel_message_batch
            ),
            web.get(
                "/v1/messages/batches/{batch_id}/results", message_batches.message_batch_results
            ),
            web.post("/v1/responses", responses.create_response),
            web.get("/v1/responses/{response_id}", stored_responses.retrieve_response),
            web.delete("/v1/responses/{response_id}", stored_responses.delete_response),
            web.get("/v1/responses/{response_id}/input_items", stored_responses.list_input_items),
            web.post("/v1/embeddings", embeddings.create_embeddings),
            web.post("/v1/moderations", moderations.create_moderation),
            web.post("/v1/rerank", rerank.rerank_v1),
            web.post("/v2/rerank", rerank.rerank_v2),
            web.post("/v1/images/generations", images.create_generation),
            web.post("/v1/images/edits", images.create_edit),
            web.get("/v1/images/files/{image_id}", image_files.retrieve_image),
            web.post("/v1/batches", batches.create_batch),
            web.get("/v1/batches", batches.list_batches),
            web.get("/v1/batches/{batch_id}", batches.retrieve_batch),
            web.post("/v1/batches/{batch_id}/cancel", batches.cancel_batch),
            web.post("/v1/files", files.create_file),
            web.get("/v1/files", files.list_files),
            web.get("/v1/files/{file_id}", files.retrieve_file),
            web.delete("/v1/files/{file_id}", files.delete_file),
            web.get("/v1/files/{file_id}/content", files.file_content),
            web.get("/v1/realtime", realtime.realtime_session),
            web.post("/v1/realtime/client_secrets", client_secrets.create_client_secret),
            web.get("/v1/models", models.list_models),
            web.get("/v1/models/{model:.+}", models.retrieve_model),
            web.get("/v1/capabilities", models.list_capabilities),
            web.get("/v1/dashboard/billing/quota", billing.quota),
            web.get("/v1/dashboard/billing/usage", billing.usage),
            web.get("/v1/dashboard/billing/subscription", billing.subscription),
            web.post("/v1/audio/transcriptions", transcriptions.create_transcription),
            web.post("/v1/audio/translations", transcriptions.create_translation),
            web.post("/v1/audio/speech", speech.create_speech),
            web.get("/v1/audio/voices", voices.list_voices),
            web.post("/v1/audio/voices", voice_clones.create_voice),
            web.delete("/v1/audio/voices/{voice_id}", voice_clones.delete_voice),
        ]
    )
