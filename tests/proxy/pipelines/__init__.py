"""Tests of pipelines through the proxy, as their responses report them: the order headers against the bodies the
upstream received, pipelines refused before any call, a failed request's strategy header, medoid's voting calls
against an upstream that refuses a field, and `contextlift detect --strategy` against the proxy's own request."""
