"""The built-in strategies, one module each, registered through the `contextlift.strategies` entry-point group exactly
as a third party's would be: `none`, `reorder`, `filter`, `query-aware`, `recite`, `fact`, `medoid`, `chain`, and
the prompts of the multi-call ones.

A strategy imports the plugin surface (`strategies.plugin`) and the core it re-exports, never detection (it receives
the request with its documents found) and never another strategy but for shared prompts and ordering."""
