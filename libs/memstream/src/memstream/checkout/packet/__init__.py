"""Phase 3 of checkout: the budgeted packet and its renderings (JSON, Markdown, Gathered)."""

from memstream.checkout.packet.assemble import assemble_packet
from memstream.checkout.packet.gathered import render_gathered
from memstream.checkout.packet.json_form import render_json
from memstream.checkout.packet.prompt import render_markdown

__all__ = ["assemble_packet", "render_gathered", "render_json", "render_markdown"]
