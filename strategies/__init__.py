"""Long-context strategies: the request model, document detection, the strategy plugins and their pipeline."""

from strategies.chain import Chain
from strategies.declared import DeclaredFormat
from strategies.detection import SHAPES, parse_request
from strategies.embedder import Embedder, SentenceTransformerEmbedder, embed_off_loop
from strategies.explain import explain_detection, render_explanation
from strategies.fact import Fact
from strategies.limits import DocumentLimitError, DocumentLimits
from strategies.medoid import Medoid
from strategies.passthrough import PassThrough
from strategies.pipeline import PipelineResult, Services, StepContext, StrategyOutcome, run_pipeline, send_once
from strategies.query_aware import QueryAware
from strategies.recite import Recite
from strategies.registry import (
    ENTRY_POINT_GROUP,
    Executor,
    Param,
    Params,
    Pipeline,
    Role,
    Step,
    Strategy,
    StrategyRegistry,
    Transform,
)
from strategies.relevance_filter import RelevanceFilter
from strategies.reorder import Reorder
from strategies.request import ChatRequest, Document, DocumentBlock
from strategies.selection import StepRequest, StrategySelectionError, parse_selection
from strategies.spans import DocumentFormat
from strategies.tokens import TiktokenTokenizer, Tokenizer
from strategies.upstream import Completion, CompletionStream, Upstream, UpstreamFailure

__all__ = [
    "ENTRY_POINT_GROUP",
    "SHAPES",
    "Chain",
    "ChatRequest",
    "Completion",
    "CompletionStream",
    "DeclaredFormat",
    "Document",
    "DocumentBlock",
    "DocumentFormat",
    "DocumentLimitError",
    "DocumentLimits",
    "Embedder",
    "Executor",
    "Fact",
    "Medoid",
    "Param",
    "Params",
    "PassThrough",
    "Pipeline",
    "PipelineResult",
    "QueryAware",
    "Recite",
    "RelevanceFilter",
    "Reorder",
    "Role",
    "SentenceTransformerEmbedder",
    "Services",
    "Step",
    "StepContext",
    "StepRequest",
    "Strategy",
    "StrategyOutcome",
    "StrategyRegistry",
    "StrategySelectionError",
    "TiktokenTokenizer",
    "Tokenizer",
    "Transform",
    "Upstream",
    "UpstreamFailure",
    "build_registry",
    "embed_off_loop",
    "explain_detection",
    "parse_request",
    "parse_selection",
    "render_explanation",
    "run_pipeline",
    "send_once",
]


def build_registry() -> StrategyRegistry:
    """A registry holding the built-in strategies and every one published under the entry-point group."""
    registry = StrategyRegistry()
    for strategy in (PassThrough(), Reorder(), RelevanceFilter(), QueryAware(), Recite(), Fact(), Medoid(), Chain()):
        registry.register(strategy)
    registry.load_entry_points()
    return registry
