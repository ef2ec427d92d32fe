"""Random template expressions for the differential check against Jinja2 (used by chat_template_oracle.py).

Expressions combine the values chat templates handle (strings with and without non-ASCII text, numbers, lists,
dicts, none, undefined names) with operators, filters, tests, methods, subscripts and slices, a few levels
deep. Both engines render `{{ expr }}` (and a loop over it); they must print the same text or both fail.
"""
import random

VARIABLES = {
    "s": "Hello Wörld",
    "e": "",
    "w": "  padded\ttext \n",
    "i": 7,
    "z": 0,
    "neg": -3,
    "f": 2.5,
    "big": 12345678901234,
    "l": [3, 1, 2],
    "ls": ["b", "A", "c"],
    "nested": [[1, 2], [3]],
    "d": {"name": "x", "n": 2, "tags": ["a", "b"]},
    "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None},
             {"role": "tool", "content": "{\"a\": 1}"}],
    "n": None,
    "t": True,
}

ATOMS = ["s", "e", "w", "i", "z", "neg", "f", "big", "l", "ls", "nested", "d", "msgs", "n", "t", "u",
         "'a'", "'Ab c'", "\"q'uote\"", "''", "0", "1", "-2", "3.0", "0.1", "[]", "[1, 'a']", "{}",
         "{'k': 1}", "none", "true", "false", "(1, 2)"]

FILTERS = ["length", "upper", "lower", "trim", "first", "last", "list", "string", "int", "float", "title",
           "capitalize", "tojson", "tojson(indent=2)", "items|list", "reverse|list", "sort", "unique|list",
           "abs", "sum", "min", "max", "join", "join(', ')", "default('D')", "default('D', true)", "d",
           "replace('l', 'L')", "select|list", "reject|list", "map('string')|list", "map('upper')|list",
           "selectattr('role', 'equalto', 'user')|list", "map(attribute='role')|list", "dictsort", "count",
           "safe", "escape", "wordcount", "round", "indent(2)", "trim('H')", "batchx"]

TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable",
         "sequence", "boolean", "true", "false", "odd", "even", "callable", "lower", "upper",
         "eq 1", "in [1, 'a']", "divisibleby 2", "gt 1"]

METHODS = [".upper()", ".lower()", ".strip()", ".split()", ".split('l')", ".startswith('H')",
           ".endswith('d')", ".replace('o', '0')", ".title()", ".items()", ".keys()", ".values()",
           ".get('name')", ".get('zz', 5)", ".count('l')", ".find('o')", ".lstrip()", ".rstrip('\\n ')",
           ".splitlines()", ".name", ".role", ".content", ".n", ".tags", ".length"]

SUBSCRIPTS = ["[0]", "[-1]", "[1]", "[5]", "['name']", "['role']", "[1:]", "[:-1]", "[::-1]", "[::2]",
              "[1:2]", "['zz']", ".0"]

SMALL_EXPONENTS = ["0", "1", "2", "3", "-1", "0.5", "z", "neg", "f", "t", "s", "n"]

BINARY = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "and",
          "or"]


def expression(rng, depth):
    if depth <= 0 or rng.random() < 0.25:
        return rng.choice(ATOMS)
    kind = rng.random()
    inner = expression(rng, depth - 1)
    if kind < 0.25:
        op = rng.choice(BINARY)
        # A small exponent: Python would spend minutes and gigabytes on 2 ** big.
        right = rng.choice(SMALL_EXPONENTS) if op == "**" else expression(rng, depth - 1)
        return f"({inner} {op} {right})"
    if kind < 0.45:
        return f"({inner}|{rng.choice(FILTERS)})"
    if kind < 0.55:
        return f"({inner} is {'not ' if rng.random() < 0.3 else ''}{rng.choice(TESTS)})"
    if kind < 0.7:
        return f"({inner}){rng.choice(METHODS)}"
    if kind < 0.85:
        return f"({inner}){rng.choice(SUBSCRIPTS)}"
    if kind < 0.92:
        return f"({inner} if {expression(rng, depth - 1)} else {expression(rng, depth - 1)})"
    return f"(not {inner})"


def cases(seed, count):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        expr = expression(rng, 3)
        if rng.random() < 0.2:
            source = f"{{% for x in {expr} %}}[{{{{ x }}}}{{{{ loop.index }}}}]{{% else %}}-{{% endfor %}}"
        else:
            source = f"{{{{ {expr} }}}}"
        out.append(source)
    return out
