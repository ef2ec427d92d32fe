#!/usr/bin/env python3
"""Writes tests/unit/chat/data/language_cases.json: one case per Jinja language feature chat templates use, with the
output the real Jinja2 produces (configured as transformers configures it) as the expected text, or the fact
that Jinja2 fails. The C++ unit test requires qrt to produce exactly these; chat_template_oracle.py re-checks
them against Jinja2 on every run.

  make_language_cases.py            rewrite the JSON from the cases below
Cases marked qrt_only describe behaviour where qrt deliberately differs from transformers' sandbox (they are not
rendered by Jinja2; their expected text is written here by hand).
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parents[1] / "unit" / "chat" / "data" / "language_cases.json"

D = {"d": {"a": 1, "b": [2, 3], "name": "x"}, "l": [1, 2, 3, 4], "s": "héllo"}
USERS = {"users": [{"name": "ann", "age": 31, "admin": True}, {"name": "Bob", "age": 25, "admin": False},
                   {"name": "cid", "age": 31}]}

# (name, template, variables, error substring for qrt or None)
CASES = [
    # ---- whitespace control, comments, raw ----
    ("trim_blocks_drops_newline_after_block", "{% if true %}\nyes\n{% endif %}\nend", {}, None),
    ("lstrip_blocks_strips_indent_before_block", "  {% if true %}\n  x\n  {% endif %}\ny", {}, None),
    ("lstrip_blocks_keeps_text_before_tag", "a {% if true %}b{% endif %}", {}, None),
    ("minus_strips_both_sides", "a  \n {{- 'b' -}} \n  c", {}, None),
    ("minus_on_blocks", "a\n  {%- if true -%}\n  b\n  {%- endif -%}\n  c", {}, None),
    ("plus_disables_lstrip", "  {%+ if true %}x{% endif %}", {}, None),
    ("plus_disables_trim", "{% if true +%}\nx{% endif %}", {}, None),
    ("variable_tags_are_not_lstripped", "  {{ 'x' }}\n  {{ 'y' }}", {}, None),
    ("comments_are_dropped", "a {# note #} b\n  {# own line #}\nc{#- strip -#}  d", {}, None),
    ("raw_block_keeps_tags", "{% raw %}{{ x }} {% if %}{% endraw %}", {}, None),
    ("raw_block_whitespace_control", "[\n  {%- raw -%}  {{ y }}  {%- endraw -%}\n]", {}, None),
    ("one_trailing_newline_is_dropped", "x\n\n", {}, None),
    ("crlf_becomes_lf", "a\r\nb\rc", {}, None),
    # ---- literals and printing ----
    ("string_escapes", "{{ 'a\\nb\\t\\u00e9\\x41\\\\' }}|{{ \"dq'\" }}|{{ 'x' 'y' }}", {}, None),
    ("number_literals", "{{ 1_000 }} {{ 0x1F }} {{ 0b101 }} {{ 1.5e3 }} {{ 3.0 }} {{ 2.50 }}", {}, None),
    ("constants_print_like_python", "{{ none }} {{ true }} {{ False }} {{ None }}", {}, None),
    ("containers_print_like_python", "{{ [1, 'a', none, true, 1.5] }} {{ {'a': 1, 'b': [2]} }} {{ (1,) }} {{ (1, 2) }}",
     {}, None),
    ("string_repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'tab\\t', 'both \\'\"'] }}", {}, None),
    ("float_repr", "{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e-5 }} {{ 0.0001 }} {{ 1 / 3 }} {{ 2.5e20 }} {{ -0.0 }}", {}, None),
    ("print_tuple_expression", "{{ 1, 'a' }}", {}, None),
    ("undefined_prints_empty", "[{{ missing }}][{{ d.missing }}][{{ l[10] }}]", D, None),
    # ---- operators ----
    ("arithmetic", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} "
     "{{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ true + 1 }}", {}, None),
    ("string_and_list_operators", "{{ 'ab' * 3 }}|{{ 3 * 'x' }}|{{ 'a' + 'b' }}|{{ 'a' ~ 1 ~ none ~ true }}|"
     "{{ [1] + [2] }}|{{ [0] * 3 }}", {}, None),
    ("comparisons_chain", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} "
     "{{ 2 >= 2 }} {{ none == none }} {{ 1 != 'x' }}", {}, None),
    ("membership", "{{ 'a' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} "
     "{{ 'a' in missing }}", {}, None),
    ("and_or_return_operands", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ none or [] }} {{ '' and 1 }} {{ not 1 == 2 }}",
     {}, None),
    ("conditional_expression", "{{ 'y' if true else 'n' }} {{ 'y' if 0 else 'n' }} [{{ 'y' if false }}]", {}, None),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ -1|abs }} "
     "{{ 'a' ~ 'b' | upper }} {{ not true or true }}", {}, None),
    # A constant left operand of ** becomes an unparenthesized Python literal: "-2 ** x" is -(2 ** x), while
    # with both sides constant Jinja computes (-2) ** 2.
    ("negative_constant_base_of_power", "{{ -2 ** x }}|{{ (0 - 3) ** x }}|{{ -2.0 ** x }}|{{ -2 ** 2 }}|"
     "{% set y = -2 %}{{ y ** x }}|{{ --2 ** x }}", {"x": 2}, None),
    ("dict_view_membership_hashes_the_key", "{{ 'a' in d.keys() }}|{{ ('a', 1) in d.items() }}|"
     "{{ ['a', 1] in d.items() }}|{{ [2, 3] in d.values() }}", D, None),
    ("unhashable_in_dict_keys_fails", "{{ [] in d.keys() }}", D, "unhashable type: 'list'"),
    ("markup_stays_markup", "{{ [(s|escape)[0]] }}{{ [(s|escape).replace('h', '<')] }}{{ [(s|escape)|last] }}"
     "{{ [(s|escape)|first] }}{{ [(s|escape)|center(9)] }}{{ [('<b>'|escape).replace('<', '[')] }}", D, None),
    ("undefined_is_a_dict_key", "{{ missing in {} }}|{{ {missing: 1}[other] }}|{{ {missing: 1}|length }}", {}, None),
    ("string_plus_int_fails", "{{ 'a' + 1 }}", {}, "can only concatenate str (not \"int\") to str"),
    ("unsupported_operand_fails", "{{ none - 1 }}", {}, "unsupported operand type(s) for -: 'NoneType' and 'int'"),
    ("division_by_zero_fails", "{{ 1 / 0 }}", {}, "division by zero"),
    ("markup_escapes_what_is_added", "{{ '<a>'|safe + '<b>' }}|{{ '<a>' + '<b>'|safe }}|{{ ('<a>'|safe) ~ '<b>' }}",
     {}, None),
    # ---- attribute and item access ----
    ("attribute_and_item_access", "{{ d.a }} {{ d['a'] }} {{ l[0] }} {{ l[-1] }} {{ l.0 }} {{ s[1] }} {{ d.b[1] }}",
     D, None),
    ("slices", "{{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[1:3] }} {{ s[1:3] }} {{ s[::-1] }} "
     "{{ l[10:] }}", D, None),
    ("dict_methods", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {{ d.get('zz', 'dflt') }} "
     "{{ d.get('a') }} {{ d.get('zz') }} {{ d.keys()|list }} {{ d.values()|list|length }}", D, None),
    ("method_beats_key_for_attribute", "{{ d.items is defined }} {{ d['items'] is string }} {{ d.name }}",
     {"d": {"items": "key", "name": "n"}}, None),
    ("string_methods", "{{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ ' a'.lstrip() }}|{{ 'a \\n'.rstrip() }}|"
     "{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}|"
     "{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'Hello World'.upper() }}|"
     "{{ 'HeLLo'.lower() }}|{{ \"they're bill's\".title() }}|{{ 'aaa'.replace('a', 'b', 2) }}|"
     "{{ 'abcabc'.find('c') }}|{{ 'abc'.count('') }}|{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ '-'.join(['a', 'b']) }}|"
     "{{ 'abc'.capitalize() }}|{{ 'x'.zfill is defined }}", {}, None),
    ("unicode_strings_count_code_points", "{{ s|length }} {{ s[1] }} {{ s|upper }} {{ 'ab' in s }} "
     "{{ s.replace('é', 'e') }}", D, None),
    ("attribute_of_undefined_fails", "{{ missing.attr }}", {}, "'missing' is undefined"),
    ("attribute_chain_through_none_fails", "{{ n.a.b }}", {"n": None}, "'None' has no attribute 'a'"),
    ("undefined_arithmetic_fails", "{{ missing + 1 }}", {}, "'missing' is undefined"),
    ("calling_a_string_fails", "{{ 'abc'() }}", {}, "'str' object is not callable"),
    # ---- filters ----
    ("filter_trim_length_case", "[{{ '  a b \\n'|trim }}] {{ 'xxayy'|trim('xy') }} {{ [1, 2]|length }} "
     "{{ {'a': 1}|count }} {{ 'aBc'|upper }} {{ 'aBc'|lower }} {{ 'hello world'|title }} {{ 'hELLO'|capitalize }}",
     {}, None),
    ("filter_tojson", "{{ d|tojson }}\n{{ d|tojson(indent=2) }}\n{{ 'é\"<\\n'|tojson }}\n"
     "{{ 'é😀'|tojson(ensure_ascii=true) }}\n{{ [1.0, 1e20, none, true, 1.5e-7]|tojson }}\n"
     "{{ {'b': 1, 'a': {}}|tojson(sort_keys=true) }}\n{{ {'a': [1, 2]}|tojson(separators=(',', ':')) }}\n"
     "{{ {'a': [], 'b': {}}|tojson(indent=4) }}\n{{ {1: 'x', true: 'y'}|tojson }}", D, None),
    ("filter_tojson_of_undefined_fails", "{{ missing|tojson }}", {}, "not JSON serializable"),
    ("filter_items_join_default", "{% for k, v in d|items %}{{ k }}:{{ v }} {% endfor %}|{{ l|join(', ') }}|"
     "{{ users|join('/', attribute='name') }}|{{ missing|default('dflt') }}|{{ ''|default('dflt') }}|"
     "{{ ''|default('dflt', true) }}|{{ none|d('x') }}", dict(D, **USERS), None),
    ("filter_first_last_list_string", "{{ l|first }} {{ l|last }} {{ 'abc'|first }} {{ d|list }} {{ 'ab'|list }} "
     "{{ 42|string ~ '!' }} {{ [1]|string }}", D, None),
    ("filter_int_float", "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ '0x1A'|int(0, 16) }} "
     "{{ 3.9|int }} {{ '1.5'|float }} {{ 'nan?'|float }} {{ 2|float }}", {}, None),
    ("filter_replace", "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 1) }} {{ 'abc'|replace('', '-') }}",
     {}, None),
    ("filter_select_reject_map", "{{ users|selectattr('admin')|map(attribute='name')|list }} "
     "{{ users|rejectattr('admin')|map(attribute='name')|join(',') }} "
     "{{ users|selectattr('age', 'equalto', 31)|list|length }} {{ [0, 1, 2, 3]|select('odd')|list }} "
     "{{ [0, 1, 2]|reject|list }} {{ ['a', 'b']|map('upper')|list }} {{ none|map('upper')|list }} "
     "{{ users|map(attribute='nick', default='?')|list }} {{ users|selectattr('age', '>', 30)|list|length }}",
     USERS, None),
    ("filter_generator_has_no_length", "{{ [1, 2]|map('string')|length }}", {}, "has no len()"),
    ("filter_unique_dictsort_sort", "{{ ['a', 'A', 'b', 'a']|unique|list }} {{ {'b': 1, 'A': 2, 'c': 0}|dictsort }} "
     "{{ {'b': 1, 'a': 2}|dictsort(by='value') }} {{ [3, 1, 2]|sort }} {{ [3, 1, 2]|sort(reverse=true) }} "
     "{{ users|sort(attribute='age')|map(attribute='name')|join(',') }} {{ ['b', 'A', 'c']|sort }}", USERS, None),
    # Jinja's sort keys are lists, compared element by element after an equality test: undefined keys are all equal
    # and keep their order instead of failing.
    ("filter_sort_undefined_keys", "{{ ('ab'|map(attribute='role')|list|sort)|length }} "
     "{{ users|sort(attribute='missing')|map(attribute='name')|join(',') }} "
     "{{ users|sort(attribute='age,missing')|map(attribute='name')|join(',') }}", USERS, None),
    ("filter_indent", "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', blank=true) }}",
     {}, None),
    ("filter_misc", "{{ [1, 2, 3]|sum }} {{ [3, 1]|min }} {{ [3, 1]|max }} {{ 2.5|round }} {{ 3.14159|round(2) }} "
     "{{ -3|abs }} {{ 'a b  c'|wordcount }} [{{ 'ab'|center(6) }}] {{ '%s-%03d'|format('x', 7) }} "
     "{{ 'abc'|reverse }} {{ [1, 2]|reverse|list }} {{ '<x>'|escape }} {{ '<x>'|e|safe }}", {}, None),
    ("unknown_filter_is_a_syntax_error", "{{ 1|nosuchfilter }}", {}, "no filter named 'nosuchfilter'"),
    ("unknown_filter_in_untaken_branch_is_fine", "{% if false %}{{ 1|nosuchfilter }}{% endif %}ok", {}, None),
    # ---- tests ----
    ("tests_types", "{{ missing is defined }} {{ missing is undefined }} {{ none is none }} {{ 'a' is string }} "
     "{{ {} is mapping }} {{ [] is mapping }} {{ 'a' is iterable }} {{ 1 is iterable }} {{ [] is sequence }} "
     "{{ 1 is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ true is integer }} "
     "{{ false is false }} {{ 1 is true }} {{ missing is iterable }}", {}, None),
    ("tests_values", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 'abc' is lower }} "
     "{{ 'ABC' is upper }} {{ 1 is eq 1 }} {{ 'a' is equalto 'b' }} {{ 2 is in [1, 2] }} {{ 2 is gt 1 }} "
     "{{ 1 is not ne 1 }} {{ none is sameas none }} {{ range is callable }} {{ 2 is lessthan 3 }}", {}, None),
    # ---- for loops ----
    ("loop_variables", "{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
     "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle('+', '-') }};{% endfor %}",
     {}, None),
    ("loop_prev_next", "{% for x in [1, 2, 3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }} {% endfor %}", {}, None),
    ("loop_else_and_filter", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1, 2, 3, 4] if x is even %}"
     "{{ loop.index }}/{{ loop.length }}:{{ x }} {% endfor %}|{% for x in [1] if false %}{% else %}none{% endfor %}",
     {}, None),
    ("loop_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}"
     "{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}, None),
    ("loop_over_dict_string_undefined", "{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}|"
     "{% for c in 'hé' %}[{{ c }}]{% endfor %}|{% for x in missing %}x{% endfor %}|"
     "{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}", {}, None),
    ("loop_over_none_fails", "{% for x in none %}{% endfor %}", {}, "'NoneType' object is not iterable"),
    ("nested_loops_have_own_loop", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{% endfor %}"
     "{{ loop.index }} {% endfor %}", {}, None),
    ("range_forms", "{{ range(3)|list }} {{ range(1, 4)|list }} {{ range(5, 0, -2)|list }}", {}, None),
    ("range_too_large_fails", "{{ range(1000000)|length }}", {}, "Range too big"),
    ("unpack_mismatch_fails", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", {}, "too many values to unpack"),
    # ---- scoping ----
    ("set_in_loop_does_not_leak", "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}",
     {}, None),
    ("set_in_if_leaks", "{% if true %}{% set y = 'in' %}{% endif %}{{ y }}", {}, None),
    ("namespace_carries_out_of_loops", "{% set ns = namespace(count=0, last=none) %}{% for i in [3, 4] %}"
     "{% set ns.count = ns.count + i %}{% set ns.last = i %}{% endfor %}{{ ns.count }} {{ ns.last }} "
     "{{ namespace({'a': 1}, b=2).b }}", {}, None),
    ("namespace_attribute_on_non_namespace_fails", "{% set d = {} %}{% set d.x = 1 %}", {},
     "cannot assign attribute on non-namespace object"),
    ("tuple_assignment", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = 'xy' %}{{ d }}{{ c }}", {}, None),
    ("set_block_and_filter_block", "{% set body %}\n  Hello {{ who }}\n{% endset %}[{{ body }}]"
     "{% set t | trim | upper %}  x  {% endset %}[{{ t }}]{% filter upper %}abc {{ who }}{% endfilter %}",
     {"who": "you"}, None),
    ("with_block_scopes", "{% with a = 1, b = 'x' %}{{ a }}{{ b }}{% endwith %}[{{ a }}]", {}, None),
    ("overriding_context_variables", "{% set messages = messages[1:] %}{{ messages|length }}",
     {"messages": [1, 2, 3]}, None),
    # ---- macros ----
    ("macro_defaults_and_keywords", "{% macro m(a, b=a + 1, c='z') %}{{ a }}{{ b }}{{ c }}{% endmacro %}"
     "{{ m(1) }} {{ m(1, 5) }} {{ m(b=2, a=0) }} {{ m(1, c='q') }}", {}, None),
    ("macro_kwargs_and_varargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }}",
     {}, None),
    ("macro_missing_argument_is_undefined", "{% macro m(a, b) %}[{{ b }}]{{ b is defined }}{% endmacro %}{{ m(1) }}",
     {}, None),
    ("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}"
     "{{ fact(5) }}", {}, None),
    ("macro_sees_globals_at_call_time", "{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}",
     {}, None),
    ("macro_local_set_does_not_leak", "{% macro m() %}{% set v = 'in' %}{{ v }}{% endmacro %}{{ m() }}[{{ v }}]", {}, None),
    ("macro_output_used_as_string", "{% macro m(x) %} {{ x }} {% endmacro %}{{ m('a')|trim ~ '|' ~ m('b')|length }}",
     {}, None),
    ("macro_too_many_arguments_fails", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", {},
     "macro 'm' takes not more than 1 argument(s)"),
    ("macro_unknown_keyword_fails", "{% macro m(a) %}{% endmacro %}{{ m(a=1, z=2) }}", {},
     "macro 'm' takes no keyword argument 'z'"),
    # ---- globals ----
    ("raise_exception", "{{ raise_exception('Bad role: ' ~ 'x') }}", {}, "template raised an exception: Bad role: x"),
    ("strftime_now_uses_the_given_time", "{{ strftime_now('%Y-%m-%d %H:%M %d %b %Y %B') }}", {"__now__": True}, None),
    ("dict_global", "{{ dict(a=1, b='x') }}", {}, None),
    ("generation_tag_renders_body", "a{% generation %}b{% set g = 1 %}{% endgeneration %}c{{ g is defined }}", {}, None),
    # ---- syntax errors ----
    ("syntax_error_empty_if", "x\n{% if %}{% endif %}", {}, "2:7: template syntax error"),
    ("syntax_error_dangling_operator", "{{ 1 + }}", {}, "1:8: template syntax error"),
    ("syntax_error_unclosed_block", "{% if true %}x", {}, "template syntax error: unexpected end of template"),
    ("syntax_error_stray_end_tag", "{% endif %}", {}, "unknown tag 'endif'"),
    ("syntax_error_unterminated_string", "{{ 'abc }}", {}, "1:4: template syntax error: unterminated string"),
    ("syntax_error_unclosed_comment", "a {# b", {}, "1:3: template syntax error: missing end of comment tag"),
    ("syntax_error_unbalanced_bracket", "{{ (1 ] }}", {}, "unexpected ']', expected ')'"),
    ("syntax_error_break_outside_loop", "{% break %}", {}, "'break' outside of a loop"),
    ("syntax_error_unknown_tag", "{% frobnicate %}", {}, "unknown tag 'frobnicate'"),
    # ---- behaviour where qrt departs from transformers' immutable sandbox ----
    ("qrt_only_list_append_and_pop", "{% set ns = namespace(ids=[]) %}{% set _ = ns.ids.append('a') %}"
     "{% set _ = ns.ids.append('b') %}{{ ns.ids.pop(0) }}{{ ns.ids }}", {}, "qrt_only:a['b']"),
]


def render_all():
    sys.path.insert(0, str(HERE))
    import chat_template_oracle as oracle  # noqa: E402  (same environment as the template oracle)
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    import os
    import time
    os.environ["TZ"] = "UTC"
    time.tzset()
    env = oracle.make_environment(ImmutableSandboxedEnvironment)
    out = []
    for name, template, variables, error in CASES:
        case = {"name": name, "template": template, "variables": {k: v for k, v in variables.items() if k != "__now__"}}
        if variables.get("__now__"):
            case["now"] = oracle.FIXED_NOW
        if error is not None and error.startswith("qrt_only:"):
            case["qrt_only"] = True
            case["expected"] = error[len("qrt_only:"):]
            out.append(case)
            continue
        try:
            text = env.from_string(template).render(**case["variables"])
            if error is not None:
                raise SystemExit(f"{name}: Jinja2 rendered {text!r} but an error was expected")
            case["expected"] = text
        except SystemExit:
            raise
        except Exception as e:  # noqa: BLE001
            if error is None:
                raise SystemExit(f"{name}: Jinja2 failed: {type(e).__name__}: {e}")
            case["error"] = error
            case["jinja2_error"] = f"{type(e).__name__}: {e}"
        out.append(case)
    return out


def main():
    cases = render_all()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
