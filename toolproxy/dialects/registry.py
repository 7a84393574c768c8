"""Every dialect by name, and the order in which they are tried when none is pinned for a model.

Markers first (they are unambiguous), then tag-per-tool XML (only declared tool names count), bare JSON last.
"""

from __future__ import annotations

from toolproxy.dialects.bare_json import BareJsonDialect
from toolproxy.dialects.base import Dialect
from toolproxy.dialects.marked_json import MarkedJsonDialect
from toolproxy.dialects.tag_xml import TagXmlDialect

DIALECTS: dict[str, Dialect] = {
    "hermes": MarkedJsonDialect("hermes", "<tool_call>", "</tool_call>"),
    "qwen_tools": MarkedJsonDialect("qwen_tools", "<tools>", "</tools>"),
    "roo_xml": TagXmlDialect(),
    "json": BareJsonDialect(),
}
DIALECT_NAMES = tuple(DIALECTS)
AUTO_ORDER = DIALECT_NAMES
