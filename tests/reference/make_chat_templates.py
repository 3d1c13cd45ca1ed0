#!/usr/bin/python3
"""Writes the chat-template fixtures: what jinja2 renders, as transformers' apply_chat_template renders a chat
template, for
- tests/fixtures/hf/jinja_cases.json: small templates of the Jinja that tfm interprets, each with its variables;
- tests/fixtures/hf/chat_templates.json: the chat templates that today's popular checkpoints of the Llama,
  Mistral and Qwen2 families ship (the files of chat_templates/, quoted exactly; SOURCES says where from),
  applied to conversations with and without tools, with the text each gives or the message it raises.

Run with Debian's interpreter inside the offline transformers environment (its README says how):
    /usr/bin/python3 tests/reference/make_chat_templates.py HFENV

transformers 4.39 renders chat templates with jinja2's ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True) and raise_exception; its later versions (4.43 on, tokenization_utils_base's
_compile_jinja_template, later utils/chat_template_utils.py) add the loopcontrols extension, a tojson filter of
their own (json.dumps with ensure_ascii=False and the indent/separators/sort_keys it is given, instead of
jinja2's HTML-safe one), strftime_now (datetime.now().strftime) and pass tools=None and documents=None when
none are given. 4.39 lacks them, so they are reproduced here from those definitions; "now" is fixed (NOW) so
that the date a template writes is the same in tfm's test.
"""
import datetime
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "hf")
TEMPLATES = os.path.join(HERE, "chat_templates")

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HFENV", "/work/hfenv"))
import hfenv  # noqa: E402,F401

import jinja2  # noqa: E402
import jinja2.ext  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

NOW = datetime.datetime(2025, 3, 4, 5, 6, 7)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' definition: jinja2's own tojson escapes HTML characters.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return NOW.strftime(format)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# ---- The Jinja that tfm interprets, template by template ----

JINJA_CASES = [
    ("plain text", {}), ("a{{ x }}b", {"x": "X"}), ("[{{ missing }}]", {}), ("{{ none }} {{ true }} {{ false }}", {}),
    ("{{ 1 + 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ -7 // 2 }} {{ 2 * 3 - 1 }} {{ -4 }} {{ 1.5 + 1 }} {{ 1 / 4 }}", {}),
    ("{{ 'a\\nb\\t\\'c\\'' }}|{{ \"it's\" }}", {}), ("a{# gone #}b", {}), ("{% if true %}\nx\n{% endif %}\ny", {}),
    ("a\n    {% if true %}\n    b\n    {% endif %}\nc", {}), ("a   {{- 'b' -}}   c  {%- if true -%}  d  {%- endif %}", {}),
    ("{{ 'a' }}\n{{ 'b' }}\n", {}), ("  {% if true %}\n  x\n  {% endif %}\n y {%- if 1 %} z {% endif -%}  \n w\n", {}),
    ("{# c #}\n  {#- d -#}  x  {#+ e #}\ny", {}), ("{%+ if true %}k{% endif %}", {}),
    ("{% for n in [1, 2, 3] %}{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %},{% endfor %}", {}),
    ("{% for x in items %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}"
     "{{ loop.length }};{% endfor %}", {"items": ["a", "b", "c"]}),
    ("{% for a, b in pairs %}{{ a }}={{ b }};{% endfor %}", {"pairs": [["x", 1], ["y", 2]]}),
    ("{% set a = 1 %}{% for x in [1, 2] %}{{ a }}{% set a = x + 10 %}{{ a }}{% endfor %}{{ a }}{% if true %}{% set b = 3 %}{% endif %}{{ b }}", {}),
    ("{% for x in missing %}x{% endfor %}.", {}),
    ("{{ 1 < 2 }}{{ 2 <= 1 }}{{ 'a' == 'a' }}{{ 'a' != 'a' }}{{ 3 > 2 }}{{ 1 >= 1 }}{{ 'b' > 'a' }}{{ u == u }}{{ u == none }}", {}),
    ("{{ true and false }}{{ true or false }}{{ not true }}{{ not (1 == 2) }}{{ 0 or 'z' }}{{ [] or 0 }}{{ 'a' and 'b' }}", {}),
    ("{{ 'b' in 'abc' }}{{ 2 in [1, 2] }}{{ 'k' in d }}{{ 'q' not in d }}{{ not 'k' in d }}", {"d": {"k": 1}}),
    ("{{ x is defined }}{{ y is defined }}{{ y is not defined }}{{ y is undefined }}{{ n is none }}{{ s is string }}{{ x is number }}"
     "{{ d is mapping }}{{ s is sequence }}{{ t is boolean }}{{ n is not none }}", {"x": 1, "n": None, "s": "s", "d": {}, "t": True}),
    ("{{ 'yes' if flag else 'no' }}[{{ 'a' if false }}]{{ 1 if 0 else 2 if 0 else 3 }}", {"flag": True}),
    ("{{ 'n=' ~ 3 ~ true ~ none }}", {}),
    ("{{ xs[0] }}{{ xs[-1] }}{{ xs[1:][0] }}{{ xs[:2] | length }}{{ 'hello'[1:3] }}{{ 'hello'[-3:] }}{{ d['k'] }}{{ d.k }}[{{ d.q }}][{{ xs[7] }}]"
     "{{ 'abc'[-1] }}{{ xs[-9:1] | length }}", {"xs": [1, 2, 3], "d": {"k": "v"}}),
    ("{{ '  x  ' | trim }}|{{ xs | length }}|{{ 'héllo' | length }}|{{ 'ÀB' | lower }}|{{ xs | join('-') }}|{{ xs | join }}|{{ xs | first }}"
     "{{ xs | last }}|{{ missing | default('d') }}{{ '' | default('e') }}{{ '' | default('f', true) }}{{ 5 | string }}|{{ xs | count }}"
     "|{{ 'ab' | first }}{{ '\\n\\tq ' | trim }}|{{ 'xxqxx' | trim('x') }}", {"xs": [1, 2, 3]}),
    ("{{ 'a' + ' b ' | trim + 'c' }}{{ ([1] + [2]) | length }}", {}),
    ("{{ ' x '.strip() }}{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('x') }}{{ 'AB'.lower() }}{{ ' x '.lstrip() }}|{{ ' x '.rstrip() }}|"
     "{{ 'xxay'.lstrip('x') }}|{{ 'ayyx'.rstrip('xy') }}|{{ '\\u3000a\\u00a0'.strip() }}|{{ 'a-b'.replace('-', '+') }}", {}),
    ("{{ 'a<b>c<b>'.split('<b>') | length }}{{ ' a  b '.split() | join(',') }}{{ 'x'.split(',')[0] }}{{ 'r</think>a'.split('</think>')[-1] }}", {}),
    ("{{ d.get('k') }}{{ d.get('q', 'dflt') }}{{ d.get('q') }}", {"d": {"k": "v"}}),
    ("{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(2, 4) %}{{ i }}{% endfor %}", {}),
    ("{{ 3 * 'ab' }}{{ 'ab' * 2 }}{{ (1 + 2) * 3 }}{{ 10 - 2 - 3 }}{{ 2 ~ 3 * 4 }}{{ 1 - 0 }}{{ 2 + 0 }}{{ 3 * 0 }}{{ -3 ** 2 }}{{ 2 ** -1 }}", {}),
    ("{{ messages[0]['content'] }}{% for m in messages[1:] %}<{{ m.role }}>{% endfor %}", {"messages": [{"role": "a", "content": "c"},
                                                                                                        {"role": "b"}, {"role": "d"}]}),
    # What the templates of today's checkpoints add: tojson as transformers defines it, namespace(), mapping
    # literals, keyword arguments, filters over lists of mappings, loop filters, the mapping methods.
    ("{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ d | tojson(separators=(',', ':')) }}|{{ d | tojson(sort_keys=true) }}|{{ 'é<\"' | tojson }}"
     "|{{ [] | tojson(indent=4) }}{{ {} | tojson }}{{ [1, [], {}] | tojson(indent=1) }}|{{ none | tojson }}{{ 1.5 | tojson }}{{ true | tojson }}",
     {"d": {"z": 1, "a": [1, 2.5, None, True, "x\ny"], "m": {"k": "v"}}}),
    ("{% set ns = namespace(a=1, b='x') %}{% for i in [1, 2, 3] %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}{{ ns.b }}"
     "{% set ns2 = namespace() %}{% set ns2.seen = true %}{{ ns2.seen }}[{{ ns2.other }}]{{ ns2.seen is defined }}", {}),
    ("{% set m = {'b': 1, 'a': [1, 2], \"c\": {'d': none}} %}{{ m | tojson }}{{ m.b }}{{ m['a'][1] }}{{ {}|length }}{{ {'k': 'v',}.k }}", {}),
    ("{{ range(3) | list | length }}{{ xs | join(d='-') }}{{ 'a,b'.split(sep=',') | length }}", {"xs": [1, 2]}),
    ("{{ ms | selectattr('role', 'equalto', 'user') | list | length }}{{ ms | rejectattr('role', 'eq', 'user') | map(attribute='role') | join(',') }}"
     "{{ ms | selectattr('tool_calls', 'undefined') | list | length }}{{ ms | selectattr('tool_calls', 'defined') | map(attribute='role') | first }}"
     "{{ ms | selectattr('content') | list | length }}{{ ms | map(attribute='content', default='-') | join('|') }}",
     {"ms": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "", "tool_calls": []}, {"role": "user", "content": "c"}, {"role": "tool"}]}),
    ("{{ xs | reject('equalto', 'b') | join }}{{ xs | select('ne', 'b') | list | tojson }}{{ ns | select('odd') | join }}{{ ns | reject('even') | join }}"
     "{{ ns | select('divisibleby', 3) | join }}{{ ns | map('string') | join('+') }}{{ xs | map('upper') | join }}{{ ns | select | list | length }}",
     {"xs": ["a", "b", "c"], "ns": [0, 1, 2, 3, 6]}),
    ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d | items %}{{ k }}{% endfor %}{{ d.keys() | join }}{{ d.values() | join }}"
     "{{ d | list | join }}{{ 'ab' | list | join('.') }}", {"d": {"z": 1, "a": 2}}),
    ("{% for x in xs if x != 2 %}{{ x }}{{ loop.index }}{{ loop.length }}{{ loop.last }};{% endfor %}{% for k, v in d.items() if k != 'return' %}{{ k }}{% endfor %}",
     {"xs": [1, 2, 3], "d": {"name": 1, "return": 2, "type": 3}}),
    ("{{ 'x' is iterable }}{{ 1 is iterable }}{{ d is iterable }}{{ 3 is odd }}{{ 4 is even }}{{ 6 is divisibleby(3) }}{{ 1 is integer }}{{ 1.0 is float }}"
     "{{ 'a' is eq('a') }}{{ 1 is equalto(2) }}{{ 'a' is in('abc') }}{{ none is false }}{{ false is false }}{{ true is true }}"
     "{{ x is callable }}{{ range is callable }}{{ strftime_now is defined }}{{ raise_exception is defined }}", {"d": {}, "x": 1}),
    ("{{ 'hello' | upper }}{{ 'ab' | reverse }}{{ [1, 2] | reverse | join }}{{ 'xax' | replace('x', 'y') }}{{ 'Ab'.upper() }}"
     "{{ 'a b c'.split(' ', 1) | length }}{{ d.items() | list | length }}{{ 'a' ~ 'b' * 2 }}", {"d": {"k": 1}}),
    ("{{ strftime_now('%d %b %Y|%Y-%m-%d|%H:%M:%S|%B %A %a %j %y %e %p %I %%') }}", {}),
    ("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"
     "{% for m in ms %}[{{ loop.previtem.r if not loop.first }}<{{ m.r }}>{{ loop.nextitem.r if not loop.last }}]{% endfor %}{% for x in [] %}x{% else %}none{% endfor %}",
     {"ms": [{"r": "a"}, {"r": "b"}, {"r": "c"}]}),
    ("{{ (1, 2) | length }}{% for a, b in [(1, 2)] %}{{ a + b }}{% endfor %}{{ xs[::-1] | join }}{{ xs[::2] | join }}{{ 'abc'[::-1] }}{{ 2 ** 3 }}",
     {"xs": [1, 2, 3]}),
    ("{{ dict(a=1, b='x') | tojson }}{{ ms[-1] == ms[0] }}{{ ms[0] == {'role': 'user'} }}{{ [1, 2] == [1, 2] }}{{ x.y is defined }}",
     {"ms": [{"role": "user"}, {"role": "user"}], "x": {"y": None}}),
]


def make_jinja_cases(env):
    cases = [{"template": t, "variables": v, "text": env.from_string(t).render(**v)} for t, v in JINJA_CASES]
    write("jinja_cases.json", cases)


# ---- The templates of today's checkpoints ----

# Each file of chat_templates/, where its text was taken from (the Hub repository's tokenizer_config.json
# "chat_template", as these projects quote it to test against it), and the special tokens that repository's
# tokenizer_config.json sets.
HFJS = "huggingface/huggingface.js packages/jinja/test/e2e.test.js@fe42e68"
OPTIMUM = "huggingface/optimum-intel optimum/exporters/openvino/utils.py@e1de5be (COMPLEX_CHAT_TEMPLATES, keyed by the Hub's exact text)"
LLAMA3 = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
MISTRAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
SOURCES = [
    ("Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-*-Instruct (and Qwen2.5-Coder-*-Instruct)", HFJS,
     {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
    ("Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-*-Instruct (and Llama-3.3-70B-Instruct)", HFJS, LLAMA3),
    ("Llama-3.2-3B-Instruct", "meta-llama/Llama-3.2-1B-Instruct and -3B-Instruct",
     "the tokenizer_config.json line that a public Llama-3.2-3B setup guide quotes, JSON-decoded; diffed against "
     "Llama-3.1's text, it differs just where the releases do (no builtin_tools, strftime_now)", LLAMA3),
    ("Mistral-7B-Instruct-v0.3", "mistralai/Mistral-7B-Instruct-v0.3", OPTIMUM, MISTRAL),
    ("Mistral-Nemo-Instruct-2407", "mistralai/Mistral-Nemo-Instruct-2407", HFJS, MISTRAL),
    ("TinyLlama-1.1B-Chat-v1.0", "TinyLlama/TinyLlama-1.1B-Chat-v1.0 (the Zephyr template)",
     "transformers' and trl's tests of the Zephyr template, huggingface.js's e2e tests", MISTRAL),
    ("DeepSeek-R1-Distill-Llama-8B", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B (a Llama 3.1 checkpoint)", OPTIMUM,
     {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}),
    ("Qwen3-8B", "Qwen/Qwen3-* (model_type qwen3: Qwen2's successor, its template Qwen2.5's with reasoning)", OPTIMUM,
     {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
]

WEATHER = {"type": "function", "function": {
    "name": "get_current_weather",
    "description": "Get the weather at a place, in °C or °F (\"celsius\" by default).",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "The city and country, e.g. São Paulo, Brazil"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["location"]},
    "return": {"type": "number", "description": "The temperature"}}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "The time now.",
                                         "parameters": {"type": "object", "properties": {}, "required": []}}}
CALL = {"id": "call0abcd", "type": "function",
        "function": {"name": "get_current_weather", "arguments": {"location": "São Paulo, Brazil", "unit": "celsius"}}}
CALL2 = {"id": "call1efgh", "type": "function", "function": {"name": "get_time", "arguments": {}}}

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": " Hi "},
     {"role": "assistant", "content": " Hello there. "}, {"role": "user", "content": "What is 2+2?\n"}],
    [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"},
     {"role": "assistant", "content": "<think>d?</think>d"}],
    [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
    [{"role": "system", "content": "Réponds en français. 🙂"}, {"role": "user", "content": "Quel temps fait-il ?"}],
]
TOOL_CONVERSATIONS = [
    [{"role": "system", "content": "You help with the weather."}, {"role": "user", "content": "How warm is it in São Paulo?"}],
    [{"role": "user", "content": "How warm is it in São Paulo?"},
     {"role": "assistant", "content": None, "tool_calls": [CALL]},
     {"role": "tool", "tool_call_id": "call0abcd", "name": "get_current_weather", "content": "31"},
     {"role": "assistant", "content": "It is 31 °C."}, {"role": "user", "content": "And the time?"}],
    [{"role": "user", "content": "Weather and time, please."},
     {"role": "assistant", "content": "Let me look.", "tool_calls": [CALL, CALL2]},
     {"role": "tool", "tool_call_id": "call0abcd", "content": "31"},
     {"role": "tool", "tool_call_id": "call1efgh", "content": "12:00"}],
    [{"role": "user", "content": "Weather?"},
     {"role": "assistant", "content": None, "tool_calls": [{**CALL, "function": {**CALL["function"], "arguments": '{"location": "Paris"}'}}]},
     {"role": "tool", "tool_call_id": "call0abcd", "content": {"temperature": 20}}],
]
# Qwen3's reasoning, given apart or inside <think>.
REASONING = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4", "reasoning_content": "\nTwo and two.\n"},
             {"role": "user", "content": "<tool_response>x</tool_response>"},
             {"role": "assistant", "content": "<think>\nHm.\n</think>\n\nSure.", "tool_calls": [CALL2]}]
# Llama 3.1's own keyword arguments (apply_chat_template passes them to the template).
LLAMA31_KWARGS = [
    {"date_string": "01 Jan 2025"}, {"tools_in_user_message": False}, {"custom_tools": [WEATHER]},
    {"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"]},
]
BUILTIN_CALL = [{"role": "user", "content": "Search the news."},
                {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "brave_search", "arguments": {"query": "news"}}}]},
                {"role": "ipython", "content": "nothing new"}]


def render(env, template, tokens, messages, prompt, kwargs):
    """apply_chat_template(messages, tools=..., add_generation_prompt=prompt, **kwargs) with tokenize=False, or
    the message of the raise_exception that stopped it ("fails", the exception's type, for any other error)."""
    case = {"messages": messages, "add_generation_prompt": prompt, "kwargs": kwargs}
    variables = {"messages": messages, "tools": None, "documents": None, "add_generation_prompt": prompt, **tokens, **kwargs}
    try:
        case["text"] = env.from_string(template).render(**variables)
    except jinja2.exceptions.UndefinedError as e:
        case["fails"] = type(e).__name__
    except jinja2.exceptions.TemplateError as e:
        case["error"] = str(e)
    except Exception as e:  # a TypeError of Python's (a string + a mapping, ...)
        case["fails"] = type(e).__name__
    return case


def template_cases(env, name, template, tokens):
    runs = [(m, {}) for m in CONVERSATIONS] + [(m, {"tools": [WEATHER, TIME]}) for m in CONVERSATIONS[:2] + TOOL_CONVERSATIONS]
    if name.startswith("Llama-3"):
        runs += [(CONVERSATIONS[1], kwargs) for kwargs in LLAMA31_KWARGS]
        runs += [(BUILTIN_CALL, {"builtin_tools": ["brave_search", "wolfram_alpha"]}), (BUILTIN_CALL, {})]
        runs += [([], {"tools": [WEATHER]})]
    if name.startswith("Qwen3"):
        runs += [(CONVERSATIONS[2], {"enable_thinking": False}), (CONVERSATIONS[0], {"enable_thinking": False}), (REASONING, {})]
    return [render(env, template, tokens, messages, prompt, kwargs) for messages, kwargs in runs for prompt in (False, True)]


def make_chat_templates(env):
    fixtures = []
    for name, repositories, source, tokens in SOURCES:
        with open(os.path.join(TEMPLATES, name + ".jinja"), encoding="utf-8", newline="") as f:
            template = f.read()
        fixtures.append({"name": name, "repositories": repositories, "quoted_from": source, "special_tokens": tokens,
                         "template": template, "cases": template_cases(env, name, template, tokens)})
    write("chat_templates.json", {"now": NOW.isoformat(), "templates": fixtures})


def write(name, content):
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        json.dump(content, f, ensure_ascii=False, indent=1)
        f.write("\n")


def main():
    env = environment()
    make_jinja_cases(env)
    make_chat_templates(env)


if __name__ == "__main__":
    main()
