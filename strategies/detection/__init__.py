"""Finding the documents in a chat request, with evidence before action: the shapes tried in order (declared formats,
the papers' formats, marked regions, numbered markers, JSON lists, documents spread over messages), the question,
the bounds on what one request may carry, and the explanation `contextlift detect` prints.

It may import the core (`strategies.request`, `strategies.spans`) and nothing of the built-in strategies or the
rankers: finding documents knows nothing of what is done with them."""
