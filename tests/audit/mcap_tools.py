"""Test helpers that rewrite real MCAP files with the mcap library, to tamper with them.

`rewrite_mcap` copies a ghost log record by record into a new, well-formed
MCAP file, passing each message through a transform. The copy is a valid
file in every MCAP sense (fresh CRCs, indexes and summary), so what a test
changes is only what the transform changes: a verifier must then catch it
from the records alone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mcap.records import Attachment, Channel, Message, Metadata, Schema
from mcap.stream_reader import StreamReader
from mcap.writer import CompressionType, Writer

__all__ = ["Transform", "rewrite_mcap"]

Transform = Callable[[str, bytes], bytes | None]
"""``(topic, data) -> new data``, or None to drop the message."""


def rewrite_mcap(src: Path, dst: Path, transform: Transform, *, chunked: bool = False) -> int:
    """Copy the MCAP file ``src`` to ``dst``, passing every message through ``transform``.

    Schemas, channels (with their ids), attachments, metadata, message order,
    ``log_time``, ``publish_time`` and ``sequence`` are kept. ``src`` must be
    readable to its end by the mcap library (a complete file).

    Args:
        src: a complete MCAP file.
        dst: where to write the copy (replaced if it exists).
        transform: given each message's topic and data, returns the data to
            write, or None to drop the message.
        chunked: write the copy with zstd chunks instead of unchunked.

    Returns:
        The number of messages written.
    """
    schema_ids: dict[int, int] = {}
    channels: dict[int, tuple[int, str]] = {}
    written = 0
    with src.open("rb") as source, dst.open("wb") as output:
        writer = Writer(
            output,
            compression=CompressionType.ZSTD if chunked else CompressionType.NONE,
            use_chunking=chunked,
        )
        writer.start(profile="", library="ghost-tests rewrite_mcap")
        for record in StreamReader(source).records:
            if isinstance(record, Schema) and record.id not in schema_ids:
                schema_ids[record.id] = writer.register_schema(
                    record.name, record.encoding, record.data
                )
            elif isinstance(record, Channel) and record.id not in channels:
                new_id = writer.register_channel(
                    record.topic,
                    record.message_encoding,
                    schema_ids.get(record.schema_id, 0),
                    dict(record.metadata),
                )
                channels[record.id] = (new_id, record.topic)
            elif isinstance(record, Message):
                channel_id, topic = channels[record.channel_id]
                data = transform(topic, record.data)
                if data is not None:
                    writer.add_message(
                        channel_id=channel_id,
                        log_time=record.log_time,
                        data=data,
                        publish_time=record.publish_time,
                        sequence=record.sequence,
                    )
                    written += 1
            elif isinstance(record, Attachment):
                writer.add_attachment(
                    create_time=record.create_time,
                    log_time=record.log_time,
                    name=record.name,
                    media_type=record.media_type,
                    data=record.data,
                )
            elif isinstance(record, Metadata):
                writer.add_metadata(record.name, dict(record.metadata))
        writer.finish()
    return written
