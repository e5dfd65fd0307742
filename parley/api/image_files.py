"""GET /v1/images/files/{image_id}: an image Parley made a URL for (``response_format:
url``), to the group that asked for it, until it expires.

The caller authenticates with any key of that group (the edge's ``Authorization``,
like every ``/v1`` call). An id of another group, an expired one and one that never
existed are the same 404, so an id tells another group nothing. The reply is the image's
bytes under the media type sniffed when it was made, private to the caller and cached
no longer than it lives.
"""

from __future__ import annotations

import time

from aiohttp import web

from parley.errors import NotFound
from parley.pipeline.context import caller, services


async def retrieve_image(request: web.Request) -> web.Response:
    image_id = request.match_info["image_id"]
    kept = await services(request).image_files.read(caller(request).group.id, image_id)
    if kept is None:
        raise NotFound(
            f"The image `{image_id[:64]}` does not exist, has expired, or belongs to "
            "another group.",
            param="image_id",
            code="image_not_found",
        )
    left = max(0, kept.expires_at - int(time.time()))
    headers = {
        "Cache-Control": f"private, max-age={left}",
        "X-Content-Type-Options": "nosniff",
        "Content-Disposition": "inline",
    }
    return web.Response(body=kept.data, content_type=kept.media_type, headers=headers)
