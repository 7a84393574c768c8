"""Every dialect by name, and the order in which they are tried when none is pinned for a model.

Special tokens first (they collide with nothing), then the XML formats, whose values hold raw multi-line code
where another format's markup is likeliest to appear (a call found early protects its values from later
dialects), then JSON between markers, tag-per-tool XML (only declared tool names count), and bare JSON last.
"""

from __future__ import annotations

from toolproxy.dialects.bare_json import BareJsonDialect
from toolproxy.dialects.base import Dialect
from toolproxy.dialects.glm_xml import GlmXmlDialect
from toolproxy.dialects.invoke_xml import InvokeXmlDialect
from toolproxy.dialects.kimi_tokens import KimiDialect
from toolproxy.dialects.marked_json import MarkedJsonDialect
from toolproxy.dialects.qwen3_xml import Qwen3XmlDialect
from toolproxy.dialects.tag_xml import TagXmlDialect

DIALECTS: dict[str, Dialect] = {
    "kimi_k2": KimiDialect(),
    # Before invoke_xml, which would take the bare <invoke> inside a MiniMax block and leave the wrapper.
    "minimax": InvokeXmlDialect("minimax", "minimax:tool_call", bare=False),
    "qwen3_coder": Qwen3XmlDialect(),
    "glm": GlmXmlDialect(),
    "invoke_xml": InvokeXmlDialect("invoke_xml", "function_calls", bare=True),
    "hermes": MarkedJsonDialect("hermes", "<tool_call>", "</tool_call>"),
    "qwen_tools": MarkedJsonDialect("qwen_tools", "<tools>", "</tools>"),
    "roo_xml": TagXmlDialect(),
    "json": BareJsonDialect(),
}
DIALECT_NAMES = tuple(DIALECTS)
AUTO_ORDER = DIALECT_NAMES
