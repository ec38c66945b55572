#!/usr/bin/env python3
"""Extracts the built-in tools' input schemas from a Claude Code release.

Claude Code 2.1.x on npm is a wrapper around a Bun-compiled binary that the
platform package (@anthropic-ai/claude-code-linux-x64) carries. This script
fetches that package with `npm pack` (into a temporary folder), reads the
module graph that Bun appends to the binary, and evaluates the bundle's
JavaScript just far enough to build each tool's input schema: a small
JavaScript parser and partial evaluator, plus a model of the bundle's
zod-compatible schema library and of its JSON Schema converter. The
schemas come out exactly as the bundle would send them to the API, under
the assumptions listed in ASSUMPTIONS (what the evaluator takes for runtime
state it cannot see).

Usage:
    scripts/extract-claude-code-tools.py [VERSION] [--out FILE]
    scripts/extract-claude-code-tools.py --binary path/to/claude

Python 3.9+, standard library only; `npm` must be on PATH unless --binary
is given. Writes tests/fixtures/claude-code-2.1-tools.json by default.
"""

import argparse
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time

# ======================================================================
# JavaScript lexer
# ======================================================================
# token kinds: 'id', 'num', 'str', 'tpl', 're', 'p' (punct)
IDENT_ESC_RE = re.compile(r'(?:\\u[0-9a-fA-F]{4}|\\u\{[0-9a-fA-F]+\}|[A-Za-z0-9_$\u0080-\uffff])+')
IDENT_RE = re.compile(r'[A-Za-z_$\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*')
NUM_RE = re.compile(r'(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?)n?')
PUNCTS = sorted(""">>>= ... === !== **= <<= >>= >>> &&= ||= ??= => == != <= >= && || ?? ?. ++ -- += -= *= /= %= &= |= ^= << >> ** { } ( ) [ ] ; , < > + - * / % & | ^ ! ~ ? : = . @ #""".split(), key=len, reverse=True)
PUNCT_RE = re.compile('|'.join(re.escape(p) for p in PUNCTS))
WS_RE = re.compile(r'(?:\s+|//[^\n]*|/\*[\s\S]*?\*/)+')
KEYWORDS_BEFORE_EXPR = {'return', 'typeof', 'instanceof', 'in', 'of', 'new', 'delete', 'void', 'throw', 'case', 'do', 'else', 'yield', 'await', 'extends'}

ESC = {'n': '\n', 't': '\t', 'r': '\r', 'b': '\b', 'f': '\f', 'v': '\v', '0': '\0'}


def unescaped(src, j):
    """The first index from j on whose character no backslash escapes (a
    backslash skips itself and the character after it)."""
    while src[j] == '\\':
        j += 2
    return j


def unescape(s):
    out = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c != '\\':
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            break
        c = s[i]
        if c in ESC and not (c == '0' and i + 1 < n and s[i + 1].isdigit()):
            out.append(ESC[c])
            i += 1
        elif c == 'x':
            out.append(chr(int(s[i + 1:i + 3], 16)))
            i += 3
        elif c == 'u':
            if s[i + 1] == '{':
                j = s.index('}', i)
                out.append(chr(int(s[i + 2:j], 16)))
                i = j + 1
            else:
                cp = int(s[i + 1:i + 5], 16)
                i += 5
                # surrogate pairs
                if 0xD800 <= cp < 0xDC00 and s[i:i + 2] == '\\u':
                    lo = int(s[i + 2:i + 6], 16)
                    if 0xDC00 <= lo < 0xE000:
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                        i += 6
                out.append(chr(cp))
        elif c == '\r':
            i += 1
            if i < n and s[i] == '\n':
                i += 1
        elif c == '\n' or c == '\u2028' or c == '\u2029':
            i += 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


class Tok:
    __slots__ = ('k', 'v', 's', 'e', 'parts')

    def __init__(self, k, v, s, e, parts=None):
        self.k, self.v, self.s, self.e, self.parts = k, v, s, e, parts

    def __repr__(self):
        return f'{self.k}:{self.v!r}'


def _regex_allowed(prev):
    if prev is None:
        return True
    if prev.k in ('num', 'str', 'tpl', 're'):
        return False
    if prev.k == 'id':
        return prev.v in KEYWORDS_BEFORE_EXPR
    if prev.k == 'p':
        return prev.v not in (')', ']', '}', '++', '--')
    return True


class Lexer:
    """Tokenizes JS source. Template literals become one 'tpl' token whose
    parts are [str, [tokens], str, [tokens], ..., str] (cooked strings)."""

    def __init__(self, src):
        self.src = src

    def lex(self, pos=0, end=None, stop_at_brace=False):
        src = self.src
        n = len(src) if end is None else end
        toks = []
        prev = None
        depth = 0
        while pos < n:
            m = WS_RE.match(src, pos)
            if m:
                pos = m.end()
                if pos >= n:
                    break
            c = src[pos]
            if c == '"' or c == "'":
                j = pos + 1
                while True:
                    j = unescaped(src, j)
                    if src[j] == c:
                        break
                    j += 1
                t = Tok('str', unescape(src[pos + 1:j]), pos, j + 1)
                pos = j + 1
            elif c == '`':
                t, pos = self._template(pos)
            elif c == '/' and _regex_allowed(prev):
                j = pos + 1
                in_cls = False
                while True:
                    j = unescaped(src, j)
                    d = src[j]
                    if d == '[':
                        in_cls = True
                    elif d == ']':
                        in_cls = False
                    elif d == '/' and not in_cls:
                        break
                    elif d == '\n':
                        raise ValueError(f'bad regex at {pos}')
                    j += 1
                j += 1
                m = IDENT_RE.match(src, j)
                if m:
                    j = m.end()
                t = Tok('re', src[pos:j], pos, j)
                pos = j
            elif c.isdigit() or (c == '.' and pos + 1 < n and src[pos + 1].isdigit()):
                m = NUM_RE.match(src, pos)
                t = Tok('num', m.group(0), pos, m.end())
                pos = m.end()
            else:
                m = IDENT_RE.match(src, pos)
                if m and (m.end() >= n or src[m.end()] != '\\'):
                    t = Tok('id', m.group(0), pos, m.end())
                    pos = m.end()
                elif m or c == '\\':
                    m = IDENT_ESC_RE.match(src, pos)
                    t = Tok('id', unescape(m.group(0)), pos, m.end())
                    pos = m.end()
                elif c == '\\':  # identifier with unicode escape (rare)
                    m = re.compile(r'(?:\\u[0-9a-fA-F]{4}|\\u\{[0-9a-fA-F]+\}|[A-Za-z0-9_$\u0080-\uffff])+').match(src, pos)
                    t = Tok('id', unescape(m.group(0)), pos, m.end())
                    pos = m.end()
                else:
                    m = PUNCT_RE.match(src, pos)
                    if not m:
                        raise ValueError(f'cannot lex at {pos}: {src[pos:pos+20]!r}')
                    v = m.group(0)
                    if stop_at_brace:
                        if v == '{':
                            depth += 1
                        elif v == '}':
                            if depth == 0:
                                return toks, pos
                            depth -= 1
                    t = Tok('p', v, pos, m.end())
                    pos = m.end()
            toks.append(t)
            prev = t
        return toks, pos

    def _template(self, pos):
        src = self.src
        start = pos
        j = pos + 1
        parts = []
        buf_start = j
        while True:
            j = unescaped(src, j)
            d = src[j]
            if d == '`':
                parts.append(unescape(src[buf_start:j]))
                return Tok('tpl', None, start, j + 1, parts), j + 1
            if d == '$' and src[j + 1] == '{':
                parts.append(unescape(src[buf_start:j]))
                toks, k = self.lex(j + 2, stop_at_brace=True)
                parts.append(toks)
                j = k + 1
                buf_start = j
                continue
            j += 1


def tokenize(src):
    return Lexer(src).lex()[0]


def bracket_close(toks, j):
    """Index of the bracket closing the one at token j, or len(toks) (j if
    past it) when none does."""
    depth = 0
    while j < len(toks):
        t = toks[j]
        if t.k == 'p':
            if t.v in '([{':
                depth += 1
            elif t.v in ')]}':
                depth -= 1
                if depth == 0:
                    return j
        j += 1
    return j


# ======================================================================
# JavaScript parser
# ======================================================================
BINPREC = {
    '??': 3, '||': 3, '&&': 4, '|': 5, '^': 6, '&': 7,
    '==': 8, '!=': 8, '===': 8, '!==': 8,
    '<': 9, '>': 9, '<=': 9, '>=': 9, 'instanceof': 9, 'in': 9,
    '<<': 10, '>>': 10, '>>>': 10,
    '+': 11, '-': 11, '*': 12, '/': 12, '%': 12, '**': 13,
}
ASSIGN_OPS = {'=', '+=', '-=', '*=', '/=', '%=', '**=', '<<=', '>>=', '>>>=', '&=', '|=', '^=', '&&=', '||=', '??='}
STMT_KW = {'var', 'let', 'const', 'return', 'if', 'for', 'while', 'do', 'switch', 'try', 'throw', 'break', 'continue', 'function', 'class', 'import', 'export'}


class ParseError(Exception):
    pass


class Node:
    __slots__ = ('t', 'a', 'pos')

    def __init__(self, t, *a, pos=None):
        self.t = t
        self.a = a
        self.pos = pos

    def __repr__(self):
        return f'{self.t}{self.a!r}'


class Parser:
    def __init__(self, toks):
        self.toks = toks
        self.i = 0
        self.n = len(toks)

    # --- helpers
    def peek(self, k=0):
        j = self.i + k
        return self.toks[j] if j < self.n else None

    def is_p(self, v, k=0):
        t = self.peek(k)
        return t is not None and t.k == 'p' and t.v == v

    def is_id(self, v, k=0):
        t = self.peek(k)
        return t is not None and t.k == 'id' and t.v == v

    def next(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, v):
        t = self.peek()
        if t is None or t.k != 'p' or t.v != v:
            raise ParseError(f'expected {v!r} at token {self.i}: {t!r}')
        self.i += 1
        return t

    def match_close(self, j):
        """Index of the bracket closing the one at token j."""
        j = bracket_close(self.toks, j)
        if j >= self.n:
            raise ParseError('unbalanced')
        return j

    # --- expressions
    def expression(self):
        e = self.assign()
        if self.is_p(','):
            items = [e]
            while self.is_p(','):
                self.i += 1
                items.append(self.assign())
            return Node('seq', items)
        return e

    def arrow_ahead(self):
        t = self.peek()
        if t is None:
            return False
        if t.k == 'id' and t.v == 'async':
            t2 = self.peek(1)
            if t2 and t2.k == 'id' and self.is_p('=>', 2):
                return True
            if t2 and t2.k == 'p' and t2.v == '(':
                j = self.match_close(self.i + 1)
                return j + 1 < self.n and self.toks[j + 1].k == 'p' and self.toks[j + 1].v == '=>'
            return False
        if t.k == 'id' and self.is_p('=>', 1):
            return True
        if t.k == 'p' and t.v == '(':
            j = self.match_close(self.i)
            return j + 1 < self.n and self.toks[j + 1].k == 'p' and self.toks[j + 1].v == '=>'
        return False

    def assign(self):
        if self.arrow_ahead():
            return self.arrow()
        t = self.peek()
        if t is not None and t.k == 'id' and t.v == 'yield':
            self.i += 1
            if self.is_p('*'):
                self.i += 1
            if self.peek() is None or (self.peek().k == 'p' and self.peek().v in (')', ']', '}', ',', ';', ':')):
                return Node('unknown', 'yield')
            self.assign()
            return Node('unknown', 'yield')
        left = self.conditional()
        t = self.peek()
        if t is not None and t.k == 'p' and t.v in ASSIGN_OPS:
            self.i += 1
            right = self.assign()
            return Node('assign', t.v, left, right)
        return left

    def arrow(self):
        is_async = False
        if self.is_id('async'):
            is_async = True
            self.i += 1
        if self.peek().k == 'id':
            params = [Node('id', self.next().v)]
        else:
            params = self.params()
        self.expect('=>')
        if self.is_p('{'):
            body = self.block_body()
            return Node('func', None, params, body, True, False, is_async)
        body = self.assign()
        return Node('func', None, params, body, True, True, is_async)

    def params(self):
        self.expect('(')
        return self.delimited(')', self.param)

    def delimited(self, close, item):
        """The items `item` reads up to the punctuator `close` (consumed),
        each followed by a comma or not."""
        out = []
        while not self.is_p(close):
            out.append(item())
            if self.is_p(','):
                self.i += 1
        self.expect(close)
        return out

    def param(self):
        if self.is_p('...'):
            self.i += 1
            return Node('rest', self.binding())
        b = self.binding()
        if self.is_p('='):
            self.i += 1
            b = Node('default', b, self.assign())
        return b

    def binding(self):
        t = self.peek()
        if t.k == 'id':
            self.i += 1
            return Node('id', t.v)
        if t.k == 'p' and t.v in '[{':
            # destructuring pattern: parse as an expression literal
            return Node('pattern', self.primary())
        raise ParseError(f'bad binding {t!r}')

    def block_body(self):
        """Parses `{ ... }` as a list of statements."""
        self.expect('{')
        stmts = []
        while not self.is_p('}'):
            stmts.append(self.statement())
        self.expect('}')
        return stmts

    def conditional(self):
        test = self.binary(0)
        if self.is_p('?'):
            self.i += 1
            a = self.assign()
            self.expect(':')
            b = self.assign()
            return Node('cond', test, a, b)
        return test

    def binary(self, minprec):
        left = self.unary()
        while True:
            t = self.peek()
            if t is None:
                return left
            if t.k == 'p' or (t.k == 'id' and t.v in ('instanceof', 'in')):
                prec = BINPREC.get(t.v)
            else:
                prec = None
            if prec is None or prec <= minprec:
                return left
            op = t.v
            self.i += 1
            right = self.binary(prec - 1 if op == '**' else prec)
            if op in ('&&', '||', '??'):
                left = Node('logic', op, left, right)
            else:
                left = Node('bin', op, left, right)

    def unary(self):
        t = self.peek()
        if t.k == 'p' and t.v in ('!', '-', '+', '~'):
            self.i += 1
            return Node('unary', t.v, self.unary())
        if t.k == 'p' and t.v in ('++', '--'):
            self.i += 1
            return Node('update', t.v, self.unary(), True)
        if t.k == 'id' and t.v in ('typeof', 'void', 'delete', 'await'):
            self.i += 1
            return Node('unary', t.v, self.unary())
        e = self.postfix()
        t = self.peek()
        if t is not None and t.k == 'p' and t.v in ('++', '--'):
            self.i += 1
            return Node('update', t.v, e, False)
        return e

    def args(self):
        self.expect('(')
        return self.delimited(')', self.argument)

    def argument(self):
        """An argument or an array's element: `...x` spreads x."""
        if self.is_p('...'):
            self.i += 1
            return Node('spread', self.assign())
        return self.assign()

    def postfix(self):
        t = self.peek()
        if t.k == 'id' and t.v == 'new':
            self.i += 1
            if self.is_p('.'):
                self.i += 1
                self.next()
                e = Node('unknown', 'new.target')
            else:
                callee = self.member_only(self.primary())
                a = self.args() if self.is_p('(') else []
                e = Node('new', callee, a)
        else:
            e = self.primary()
        return self.tail(e)

    def member_only(self, e):
        while True:
            if self.is_p('.'):
                self.i += 1
                name = self.next()
                e = Node('member', e, name.v, False)
            elif self.is_p('['):
                e = self.index(e, False)
            else:
                return e

    def index(self, e, optional):
        """`e[x]`, the `[` next."""
        self.i += 1
        x = self.expression()
        self.expect(']')
        return Node('index', e, x, optional)

    def tail(self, e):
        while True:
            t = self.peek()
            if t is None:
                return e
            if t.k == 'p':
                if t.v == '.':
                    self.i += 1
                    name = self.next()
                    if name.k == 'p' and name.v == '#':
                        name = self.next()
                    e = Node('member', e, name.v, False)
                    continue
                if t.v == '?.':
                    self.i += 1
                    if self.is_p('('):
                        e = Node('call', e, self.args(), True)
                    elif self.is_p('['):
                        e = self.index(e, True)
                    else:
                        name = self.next()
                        e = Node('member', e, name.v, True)
                    continue
                if t.v == '[':
                    e = self.index(e, False)
                    continue
                if t.v == '(':
                    e = Node('call', e, self.args(), False)
                    continue
            if t.k == 'tpl':
                self.i += 1
                e = Node('tagged', e, self.template(t))
                continue
            return e

    def template(self, t):
        parts = []
        for idx, p in enumerate(t.parts):
            if idx % 2 == 0:
                parts.append(p)
            else:
                sub = Parser(p)
                parts.append(sub.expression())
        return Node('tpl', parts)

    def primary(self):
        t = self.next()
        k = t.k
        if k == 'id':
            v = t.v
            if v == 'function' or (v == 'async' and self.is_id('function')):
                if v == 'async':
                    self.i += 1
                return self.function_rest(is_async=(v == 'async'))
            if v == 'class':
                return self.class_rest()
            if v == 'import':
                if self.is_p('.'):
                    # import.meta.require("x")
                    self.i += 1
                    self.next()  # meta
                    return Node('import_meta')
                if self.is_p('('):
                    a = self.args()
                    return Node('dyn_import', a)
            if v == 'true':
                return Node('lit', True)
            if v == 'false':
                return Node('lit', False)
            if v == 'null':
                return Node('lit', None)
            if v == 'this':
                return Node('this')
            if v == 'super':
                return Node('unknown', 'super')
            return Node('id', v, pos=t.s)
        if k == 'num':
            return Node('lit', parse_num(t.v))
        if k == 'str':
            return Node('lit', t.v)
        if k == 'tpl':
            return self.template(t)
        if k == 're':
            return Node('regex', t.v)
        v = t.v
        if v == '(':
            e = self.expression()
            self.expect(')')
            return e
        if v == '[':
            # A hole (a comma alone) is undefined.
            return Node('arr', self.delimited(']', lambda: Node('lit', Undefined) if self.is_p(',') else self.argument()))
        if v == '{':
            return self.object_rest()
        if v == '#':
            name = self.next()
            return Node('id', '#' + name.v)
        raise ParseError(f'unexpected token {t!r} at {self.i - 1}')

    def prop_key(self):
        t = self.next()
        if t.k == 'p' and t.v == '[':
            x = self.assign()
            self.expect(']')
            return x, True
        if t.k == 'num':
            return Node('lit', str(parse_num_key(t.v))), False
        if t.k == 'p' and t.v == '#':
            t = self.next()
        return Node('lit', t.v), False

    def object_rest(self):
        props = []
        while not self.is_p('}'):
            if self.is_p('...'):
                self.i += 1
                props.append(('spread', self.assign()))
            else:
                t = self.peek()
                kind = 'init'
                if t.k == 'id' and t.v in ('get', 'set', 'async', 'static') and not (self.is_p(',', 1) or self.is_p(':', 1) or self.is_p('(', 1) or self.is_p('}', 1) or self.is_p('=', 1)):
                    kind = t.v
                    self.i += 1
                gen = False
                if self.is_p('*'):
                    self.i += 1
                    gen = True
                t = self.peek()
                key, computed = self.prop_key()
                if self.is_p(':'):
                    self.i += 1
                    props.append(('kv', key, self.assign(), computed))
                elif self.is_p('('):
                    ps = self.params()
                    body = self.block_body()
                    fn = Node('func', None, ps, body, False, False, 'gen' if gen else kind == 'async')
                    if kind == 'get':
                        props.append(('get', key, fn, computed))
                    elif kind == 'set':
                        props.append(('set', key, fn, computed))
                    else:
                        props.append(('kv', key, fn, computed))
                elif self.is_p('='):  # shorthand with default (pattern)
                    self.i += 1
                    d = self.assign()
                    props.append(('kv', key, Node('default', Node('id', t.v), d), False))
                else:
                    props.append(('kv', key, Node('id', t.v, pos=t.s), False))
            if self.is_p(','):
                self.i += 1
        self.expect('}')
        return Node('obj', props)

    def function_rest(self, is_async=False):
        if self.is_p('*'):
            self.i += 1
            is_async = 'gen'
        name = None
        if self.peek().k == 'id':
            name = self.next().v
        ps = self.params()
        body = self.block_body()
        return Node('func', name, ps, body, False, False, is_async)

    def class_rest(self):
        name = None
        if self.peek().k == 'id' and self.peek().v != 'extends':
            name = self.next().v
        sup = None
        if self.is_id('extends'):
            self.i += 1
            sup = self.tail(self.primary())
        # class body
        start = self.i
        end = self.match_close(self.i)
        members = self.class_members(start, end)
        self.i = end + 1
        return Node('class', name, sup, members)

    def class_members(self, start, end):
        members = []
        p = Parser(self.toks[start + 1:end])
        while p.i < p.n:
            if p.is_p(';'):
                p.i += 1
                continue
            static = False
            kind = 'method'
            if p.is_id('static') and not p.is_p('(', 1) and not p.is_p('=', 1):
                static = True
                p.i += 1
                if p.is_p('{'):
                    p.block_body()
                    continue
            t = p.peek()
            if t.k == 'id' and t.v in ('get', 'set', 'async') and not (p.is_p('(', 1) or p.is_p('=', 1) or p.is_p(';', 1) or p.is_p('}', 1)):
                kind = t.v
                p.i += 1
            if p.is_p('*'):
                p.i += 1
            key, computed = p.prop_key()
            if p.is_p('('):
                ps = p.params()
                body = p.block_body()
                members.append((kind, key, Node('func', None, ps, body, False, False, kind == 'async'), static))
            else:
                val = None
                if p.is_p('='):
                    p.i += 1
                    val = p.assign()
                members.append(('field', key, val, static))
                if p.is_p(';'):
                    p.i += 1
        return members

    # --- statements
    def statement(self):
        t = self.peek()
        if t.k == 'p':
            if t.v == ';':
                self.i += 1
                return Node('empty')
            if t.v == '{':
                return Node('block', self.block_body())
        if t.k == 'id':
            v = t.v
            if v in ('var', 'let', 'const') and self.peek(1) is not None and (self.peek(1).k == 'id' or (self.peek(1).k == 'p' and self.peek(1).v in '[{')):
                self.i += 1
                decls = self.var_decls()
                self.semi()
                return Node('var', v, decls)
            if v == 'return':
                self.i += 1
                if self.is_p(';') or self.is_p('}'):
                    self.semi()
                    return Node('return', None)
                e = self.expression()
                self.semi()
                return Node('return', e)
            if v == 'if':
                self.i += 1
                self.expect('(')
                test = self.expression()
                self.expect(')')
                cons = self.statement()
                alt = None
                if self.is_id('else'):
                    self.i += 1
                    alt = self.statement()
                return Node('if', test, cons, alt)
            if v == 'throw':
                self.i += 1
                e = self.expression()
                self.semi()
                return Node('throw', e)
            if v == 'function' or (v == 'async' and self.is_id('function', 1)):
                if v == 'async':
                    self.i += 1
                self.i += 1
                f = self.function_rest()
                return Node('funcdecl', f)
            if v == 'class':
                self.i += 1
                c = self.class_rest()
                return Node('classdecl', c)
            if v == 'for':
                self.i += 1
                if self.is_id('await'):
                    self.i += 1
                save = self.i
                try:
                    return self.for_rest()
                except ParseError:
                    self.i = save
                    j = self.match_close(self.i)
                    self.i = j + 1
                    body = self.statement()
                    return Node('opaque', v, body)
            if v in ('while', 'with'):
                self.i += 1
                self.expect('(')
                test = self.expression()
                self.expect(')')
                body = self.statement()
                return Node('while', test, body) if v == 'while' else Node('opaque', v, body)
            if v == 'do':
                self.i += 1
                body = self.statement()
                self.i += 1  # while
                self.expect('(')
                test = self.expression()
                self.expect(')')
                self.semi()
                return Node('dowhile', body, test)
            if v == 'switch':
                self.i += 1
                self.expect('(')
                disc = self.expression()
                self.expect(')')
                self.expect('{')
                cases = []
                while not self.is_p('}'):
                    if self.is_id('case'):
                        self.i += 1
                        test = self.expression()
                    else:
                        self.i += 1  # default
                        test = None
                    self.expect(':')
                    body = []
                    while not (self.is_p('}') or self.is_id('case') or self.is_id('default') and self.is_p(':', 1)):
                        body.append(self.statement())
                    cases.append((test, body))
                self.expect('}')
                return Node('switch', disc, cases)
            if v == 'try':
                self.i += 1
                blk = self.block_body()
                handler = None
                fin = None
                if self.is_id('catch'):
                    self.i += 1
                    if self.is_p('('):
                        j = self.match_close(self.i)
                        self.i = j + 1
                    handler = self.block_body()
                if self.is_id('finally'):
                    self.i += 1
                    fin = self.block_body()
                return Node('try', blk, handler, fin)
            if v in ('break', 'continue'):
                self.i += 1
                label = None
                if self.peek() is not None and self.peek().k == 'id' and self.peek().v not in STMT_KW and self.peek().v not in ('case', 'default'):
                    label = self.next().v
                self.semi()
                return Node(v, label)
            if self.is_p(':', 1) and v not in ('true', 'false', 'null', 'this'):
                self.i += 2
                return self.statement()
        e = self.expression()
        self.semi()
        return Node('expr', e)

    def for_rest(self):
        self.expect('(')
        init = None
        if self.peek().k == 'id' and self.peek().v in ('var', 'let', 'const') and not self.is_p(';', 1):
            kw = self.next().v
            save = self.i
            b = self.binding()
            if self.is_id('of') or self.is_id('in'):
                return self.for_of_in_rest(b)
            self.i = save
            init = Node('var', kw, self.var_decls())
        elif not self.is_p(';'):
            e = self.expression_no_in()
            if self.is_id('of') or self.is_id('in'):
                return self.for_of_in_rest(Node('target', e))
            init = Node('expr', e)
        self.expect(';')
        test = None if self.is_p(';') else self.expression()
        self.expect(';')
        update = None if self.is_p(')') else self.expression()
        self.expect(')')
        body = self.statement()
        return Node('for', init, test, update, body)

    def for_of_in_rest(self, left):
        """`for (left of x) body` or `in`, from the `of` or `in` on."""
        kind = self.next().v
        right = self.assign() if kind == 'of' else self.expression()
        self.expect(')')
        body = self.statement()
        return Node('forof' if kind == 'of' else 'forin', left, right, body)

    def expression_no_in(self):
        # `in` inside a for head is rare in minified code; parse up to it
        start = self.i
        depth = 0
        j = self.i
        while j < self.n:
            t = self.toks[j]
            if t.k == 'p':
                if t.v in '([{':
                    depth += 1
                elif t.v in ')]}':
                    if depth == 0:
                        break
                    depth -= 1
                elif t.v == ';' and depth == 0:
                    break
            elif t.k == 'id' and t.v in ('in', 'of') and depth == 0:
                break
            j += 1
        sub = Parser(self.toks[start:j])
        e = sub.expression()
        self.i = start + sub.i
        return e

    def semi(self):
        if self.is_p(';'):
            self.i += 1

    def var_decls(self):
        decls = []
        while True:
            b = self.binding()
            init = None
            if self.is_p('='):
                self.i += 1
                init = self.assign()
            elif self.is_id('of') or self.is_id('in'):
                return decls
            decls.append((b, init))
            if self.is_p(','):
                self.i += 1
                continue
            return decls


class _Undef:
    _inst = None

    def __new__(cls):
        if cls._inst is None:
            cls._inst = super().__new__(cls)
        return cls._inst

    def __repr__(self):
        return 'undefined'

    def __bool__(self):
        return False


Undefined = _Undef()


def parse_num(s):
    s = s.replace('_', '')
    if s.endswith('n'):
        s = s[:-1]
    sl = s.lower()
    if sl.startswith('0x'):
        return int(sl, 16)
    if sl.startswith('0b'):
        return int(sl[2:], 2)
    if sl.startswith('0o'):
        return int(sl[2:], 8)
    f = float(s)
    return int(f) if f.is_integer() and 'e' not in sl and '.' not in sl else f


def parse_num_key(s):
    v = parse_num(s)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return v


def unparse(n, depth=0):
    if depth > 12:
        return '…'
    u = lambda x: unparse(x, depth + 1)
    t = n.t
    a = n.a
    if t == 'id':
        return a[0]
    if t == 'lit':
        v = a[0]
        if isinstance(v, str):
            return repr(v) if len(v) < 60 else repr(v[:57] + '...')
        return {True: '!0', False: '!1', None: 'null'}.get(v, str(v)) if not isinstance(v, (int, float)) or isinstance(v, bool) else str(v)
    if t == 'call':
        return f"{u(a[0])}{'?.' if a[2] else ''}({', '.join(u(x) for x in a[1])})"
    if t == 'new':
        return f"new {u(a[0])}({', '.join(u(x) for x in a[1])})"
    if t == 'member':
        return f"{u(a[0])}{'?.' if a[2] else '.'}{a[1]}"
    if t == 'index':
        return f"{u(a[0])}[{u(a[1])}]"
    if t == 'unary':
        return f"{a[0]}{' ' if a[0].isalpha() else ''}{u(a[1])}"
    if t in ('bin', 'logic'):
        return f"({u(a[1])} {a[0]} {u(a[2])})"
    if t == 'cond':
        return f"({u(a[0])} ? {u(a[1])} : {u(a[2])})"
    if t == 'func':
        return 'function(){…}' if not a[3] else '() => …'
    if t == 'obj':
        return '{…}'
    if t == 'arr':
        return f"[{', '.join(u(x) for x in a[0][:6])}]"
    if t == 'tpl':
        return '`…`'
    if t == 'spread':
        return '...' + u(a[0])
    return f'<{t}>'


# ======================================================================
# modules and a partial evaluator
# ======================================================================
class Unknown:
    __slots__ = ('why',)

    def __init__(self, why=''):
        self.why = why

    def __repr__(self):
        return f'<?{self.why}>'

    def __bool__(self):
        raise Indeterminate(self.why)


class Indeterminate(Exception):
    pass


class RegExpVal:
    def __init__(self, src):
        self.literal = src
        j = src.rindex('/')
        self.source = src[1:j]
        self.flags = src[j + 1:]

    def __repr__(self):
        return self.literal


class JSObj(dict):
    """A plain JS object: ordered keys, optional getters."""
    __slots__ = ('getters',)

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.getters = None


class Func:
    __slots__ = ('node', 'env', 'mod', 'name', 'this')

    def __init__(self, node, env, mod, this=None):
        self.node, self.env, self.mod, self.this = node, env, mod, this
        self.name = node.a[0]

    def __repr__(self):
        return f'<func {self.name or "anon"} in {self.mod.short}>'


class Builtin:
    __slots__ = ('fn', 'name')

    def __init__(self, fn, name=''):
        self.fn, self.name = fn, name

    def __repr__(self):
        return f'<builtin {self.name}>'


class ClassVal:
    def __init__(self, node, env, mod):
        self.node, self.env, self.mod = node, env, mod
        self.name = node.a[0]

    def __repr__(self):
        return f'<class {self.name} in {self.mod.short}>'


class Scope:
    __slots__ = ('vars', 'parent', 'mod')

    def __init__(self, parent, mod, vars=None):
        self.vars = vars if vars is not None else {}
        self.parent = parent
        self.mod = mod


class Module:
    def __init__(self, bundle, name, src):
        self.bundle = bundle
        self.name = name
        self.short = name.rsplit('/', 1)[-1]
        self.src = src
        self._toks = None
        self.decls = None  # name -> (kind, tokidx)
        self.exports = {}
        self.cache = {}
        self.scope = Scope(None, self)
        self.star_imports = []

    @property
    def toks(self):
        if self._toks is None:
            try:
                self._toks = Lexer(self.src).lex()[0]
            except Exception as e:  # not JavaScript we can read
                self.lex_error = str(e)
                self._toks = []
        return self._toks

    def scan(self):
        if self.decls is not None:
            return
        toks = self.toks
        n = len(toks)
        decls = {}
        i = 0
        ASI_KW = {'var', 'let', 'const', 'function', 'class', 'export', 'import', 'async'}

        def skip_expr(j):
            depth = 0
            while j < n:
                t = toks[j]
                if t.k == 'p':
                    v = t.v
                    if v in '([{':
                        depth += 1
                    elif v in ')]}':
                        depth -= 1
                        if depth < 0:
                            return j
                    elif depth == 0 and (v == ',' or v == ';'):
                        return j
                elif depth == 0 and t.k == 'id' and t.v in ASI_KW and j > 0:
                    pv = toks[j - 1]
                    if pv.k == 'p' and pv.v in (')', ']', '}') or pv.k in ('num', 'str', 'tpl'):
                        if t.v != 'async' or (j + 1 < n and toks[j + 1].k == 'id' and toks[j + 1].v == 'function'):
                            return j
                j += 1
            return j

        def match_close(j):
            return bracket_close(toks, j)

        def specifiers(j):
            """The `{a, b as c}` of an import or export at token j (the `{`):
            [(a, a), (b, c)], and the index after the `}`."""
            names = []
            j += 1
            while not (toks[j].k == 'p' and toks[j].v == '}'):
                if toks[j].k == 'p' and toks[j].v == ',':
                    j += 1
                    continue
                a = toks[j].v
                b = a
                if toks[j + 1].k == 'id' and toks[j + 1].v == 'as':
                    b = toks[j + 2].v
                    j += 3
                else:
                    j += 1
                names.append((a, b))
            return names, j + 1

        while i < n:
            t = toks[i]
            if t.k == 'id':
                v = t.v
                if v in ('var', 'let', 'const'):
                    i += 1
                    while i < n:
                        if toks[i].k == 'id':
                            name = toks[i].v
                            if i + 1 < n and toks[i + 1].k == 'p' and toks[i + 1].v == '=':
                                j0 = i + 2
                                i = skip_expr(i + 2)
                                decls[name] = ('init', j0, i)
                            else:
                                decls.setdefault(name, ('undef', i))
                                i += 1
                        elif toks[i].k == 'p' and toks[i].v in '[{':
                            j = match_close(i)
                            # destructuring at top level: record names as unknown
                            for k in range(i, j):
                                if toks[k].k == 'id':
                                    decls.setdefault(toks[k].v, ('unknown', k))
                            i = skip_expr(j + 1)
                        else:
                            i += 1
                            break
                        if i < n and toks[i].k == 'p' and toks[i].v == ',':
                            i += 1
                            continue
                        break
                    continue
                if v == 'async' and i + 1 < n and toks[i + 1].k == 'id' and toks[i + 1].v == 'function':
                    i += 1
                    continue
                if v == 'function':
                    j = i + 1
                    if toks[j].k == 'p' and toks[j].v == '*':
                        j += 1
                    if toks[j].k == 'id':
                        decls[toks[j].v] = ('func', i)
                    j = match_close(j)  # params
                    j = match_close(j + 1)  # body
                    i = j + 1
                    continue
                if v == 'class':
                    name = toks[i + 1].v if toks[i + 1].k == 'id' and toks[i + 1].v != 'extends' else None
                    j = i + 1
                    depth = 0
                    while True:
                        tt = toks[j]
                        if tt.k == 'p':
                            if tt.v == '{' and depth == 0:
                                break
                            if tt.v in '([':
                                depth += 1
                            elif tt.v in ')]':
                                depth -= 1
                        j += 1
                    if name:
                        decls[name] = ('class', i)
                    i = match_close(j) + 1
                    continue
                if v == 'import' and i + 1 < n and not (toks[i + 1].k == 'p' and toks[i + 1].v in ('.', '(')):
                    j = i + 1
                    if toks[j].k == 'str':
                        i = j + 1
                        continue
                    names = []
                    default = None
                    star = None
                    if toks[j].k == 'id' and toks[j].v != 'from':
                        default = toks[j].v
                        j += 1
                        if toks[j].k == 'p' and toks[j].v == ',':
                            j += 1
                    if toks[j].k == 'p' and toks[j].v == '*':
                        star = toks[j + 2].v
                        j += 3
                    elif toks[j].k == 'p' and toks[j].v == '{':
                        names, j = specifiers(j)
                    # from "x"
                    j += 1
                    src = toks[j].v
                    for a, b in names:
                        decls[b] = ('import', src, a)
                    if default:
                        decls[default] = ('import', src, 'default')
                    if star:
                        decls[star] = ('ns', src, None)
                    i = j + 1
                    continue
                if v == 'export':
                    j = i + 1
                    if toks[j].k == 'p' and toks[j].v == '{':
                        names, j = specifiers(j)
                        for a, b in names:
                            self.exports[b] = a
                        if j < n and toks[j].k == 'id' and toks[j].v == 'from':
                            src = toks[j + 1].v
                            j += 2
                        i = j
                        continue
                    if toks[j].k == 'p' and toks[j].v == '*':
                        # export * from "x"
                        self.star_imports.append(toks[j + 2].v)
                        i = j + 3
                        continue
                    i = j
                    continue
            if t.k == 'p' and t.v in '([{':
                i = match_close(i) + 1
                continue
            i += 1
        self.decls = decls

    def lookup(self, name, interp):
        self.scan()
        if name in self.cache:
            return self.cache[name]
        d = self.decls.get(name)
        if d is None:
            return interp.global_(name)
        kind = d[0]
        if kind == 'import':
            m = self.bundle.module(d[1])
            if m is None:
                v = Unknown(f'import {d[1]}')
            else:
                v = m.export(d[2], interp)
            self.cache[name] = v
            return v
        if kind == 'ns':
            m = self.bundle.module(d[1])
            v = Namespace(m) if m else Unknown('ns')
            self.cache[name] = v
            return v
        self.cache[name] = Unknown(f'recursive {name}')
        try:
            if kind == 'init':
                p = Parser(self.toks)
                p.i = d[1]
                node = p.assign()
                v = interp.eval(node, self.scope)
            elif kind == 'func':
                p = Parser(self.toks)
                p.i = d[1]
                node = p.primary()
                v = Func(node, self.scope, self)
            elif kind == 'class':
                p = Parser(self.toks)
                p.i = d[1]
                node = p.primary()
                v = ClassVal(node, self.scope, self)
            elif kind == 'undef':
                v = Undefined
            else:
                v = Unknown(f'{kind} {name}')
        except (ParseError, IndexError, RecursionError) as e:
            v = Unknown(f'parse error {name}: {e}')
        self.cache[name] = v
        return v

    def export(self, name, interp):
        self.scan()
        local = self.exports.get(name)
        if local is None:
            for s in self.star_imports:
                m = self.bundle.module(s)
                if m:
                    m.scan()
                    if name in m.exports:
                        return m.export(name, interp)
            if name in self.decls:
                return self.lookup(name, interp)
            return Unknown(f'no export {name} in {self.short}')
        return self.lookup(local, interp)


class Namespace:
    def __init__(self, mod):
        self.mod = mod


class Bundle:
    def __init__(self, files):
        self.files = files
        self.mods = {}

    def module(self, name):
        if name not in self.mods:
            src = self.files.get(name)
            self.mods[name] = Module(self, name, src) if src is not None else None
        return self.mods[name]


class ReturnSignal(Exception):
    def __init__(self, v):
        self.v = v


class ThrowSignal(Exception):
    pass


class LoopSignal(Exception):
    def __init__(self, kind, label):
        self.kind, self.label = kind, label


class _IfUnknown(Exception):
    def __init__(self, v, stmt):
        self.v = v
        self.stmt = stmt


def js_str(v):
    if isinstance(v, str):
        return v
    if v is True:
        return 'true'
    if v is False:
        return 'false'
    if v is None:
        return 'null'
    if v is Undefined:
        return 'undefined'
    if isinstance(v, bool):
        return 'true' if v else 'false'
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != v:
            return 'NaN'
        if v in (math.inf, -math.inf):
            return 'Infinity' if v > 0 else '-Infinity'
        if v.is_integer() and abs(v) < 1e21:
            return str(int(v))
        return repr(v)
    if isinstance(v, list):
        parts = []
        for x in v:
            s = '' if x is None or x is Undefined else js_str(x)
            if isinstance(s, Unknown):
                return s
            parts.append(s)
        return ','.join(parts)
    if isinstance(v, Unknown):
        return v
    if isinstance(v, RegExpVal):
        return v.literal
    if isinstance(v, JSObj):
        return '[object Object]'
    return Unknown(f'tostring {type(v).__name__}')


LENIENT = {'on': False, 'log': None}


def truthy(v):
    if isinstance(v, Unknown):
        if LENIENT['on']:
            if LENIENT['log'] is not None:
                LENIENT['log'].append(v.why)
            return False
        raise Indeterminate(v.why)
    if isinstance(v, Choice):
        if LENIENT['on']:
            return truthy(resolve_choice(v))
        raise Indeterminate('choice')
    if v is None or v is Undefined or v is False:
        return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v != 0 and v == v
    if isinstance(v, str):
        return v != ''
    return True


def iterated(v):
    """What iterating v gives, as a list (None when it cannot be iterated
    here): an array's elements, a string's characters, a Set's items, a
    Map's [key, value] pairs."""
    if isinstance(v, (list, str)):
        return list(v)
    if isinstance(v, JSSet):
        return list(v.items)
    if isinstance(v, JSMap):
        return [[k, x] for k, x in v.items]
    return None


def loop_rounds():
    """Counts a loop's rounds: past 2000, the function's result is Unknown."""
    for _ in range(2000):
        yield
    raise ReturnSignal(Unknown('loop limit'))


def js_eq(a, b):
    if LENIENT['on']:
        if isinstance(a, Unknown):
            a = Undefined
        if isinstance(b, Unknown):
            b = Undefined
    if isinstance(a, Unknown) or isinstance(b, Unknown):
        return Unknown('eq')
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    if (a is None or a is Undefined) and (b is None or b is Undefined):
        return a is b
    return a is b


def typeof(v):
    if isinstance(v, Unknown):
        return 'undefined' if LENIENT['on'] else Unknown('typeof')
    if v is Undefined:
        return 'undefined'
    if isinstance(v, bool):
        return 'boolean'
    if isinstance(v, (int, float)):
        return 'number'
    if isinstance(v, str):
        return 'string'
    if isinstance(v, (Func, Builtin, ClassVal)):
        return 'function'
    return 'object'


class Interp:
    MAX_DEPTH = 60

    def __init__(self, bundle, hooks=None):
        self.bundle = bundle
        self.depth = 0
        self.hooks = hooks  # object with optional methods: on_new, on_call_object_literal, method
        self.globals = self._make_globals()
        self.calls = 0
        self.budget = 60000

    # --- globals
    def _make_globals(self):
        def fromEntries(this, args):
            a = args[0] if args else Undefined
            if not isinstance(a, list):
                return Unknown('fromEntries')
            o = JSObj()
            for pair in a:
                if not isinstance(pair, list) or len(pair) < 2:
                    return Unknown('fromEntries pair')
                k = js_str(pair[0])
                if isinstance(k, Unknown):
                    return k
                o[k] = pair[1]
            return o

        def entries(this, args):
            a = args[0]
            if isinstance(a, dict):
                return [[k, v] for k, v in a.items()]
            return Unknown('entries')

        def keys(this, args):
            a = args[0]
            if isinstance(a, dict):
                return list(a.keys())
            if isinstance(a, list):
                return [str(i) for i in range(len(a))]
            return Unknown('keys')

        def values(this, args):
            a = args[0]
            if isinstance(a, dict):
                return list(a.values())
            return Unknown('values')

        def assign(this, args):
            t = args[0]
            if not isinstance(t, dict):
                return Unknown('assign')
            for s in args[1:]:
                if isinstance(s, dict):
                    t.update(s)
                elif s is None or s is Undefined:
                    pass
                else:
                    return Unknown('assign')
            return t

        def ident(this, args):
            return args[0] if args else Undefined

        def is_array(this, args):
            return isinstance(args[0], list) if args else False

        def string(this, args):
            return js_str(args[0]) if args else ''

        def stringify(this, args):
            try:
                return json.dumps(to_py(args[0]), separators=(',', ':'), ensure_ascii=False)
            except Exception:
                return Unknown('stringify')

        def array_from(this, args):
            a = args[0]
            if isinstance(a, list):
                r = list(a)
            elif isinstance(a, str):
                r = list(a)
            else:
                return Unknown('Array.from')
            if len(args) > 1:
                return [self.call(args[1], [x, i]) for i, x in enumerate(r)]
            return r

        def mk(d):
            o = JSObj()
            for k, v in d.items():
                o[k] = Builtin(v, k) if callable(v) else v
            return o

        def mmax(this, args):
            try:
                return max(args)
            except Exception:
                return Unknown('max')

        def mmin(this, args):
            try:
                return min(args)
            except Exception:
                return Unknown('min')

        def number(this, args):
            a = args[0] if args else 0
            if isinstance(a, (int, float)):
                return a
            if isinstance(a, str):
                try:
                    return int(a)
                except ValueError:
                    try:
                        return float(a)
                    except ValueError:
                        return math.nan
            return Unknown('Number')

        def boolean(this, args):
            try:
                return truthy(args[0]) if args else False
            except Indeterminate:
                return Unknown('Boolean')

        g = {
            'Object': mk({'fromEntries': fromEntries, 'entries': entries, 'keys': keys, 'values': values,
                          'assign': assign, 'freeze': ident, 'seal': ident}),
            'Array': mk({'isArray': is_array, 'from': array_from}),
            'JSON': mk({'stringify': stringify}),
            'String': Builtin(string, 'String'),
            'Number': mk({'MAX_SAFE_INTEGER': 9007199254740991, 'MIN_SAFE_INTEGER': -9007199254740991,
                          'isFinite': lambda t, a: isinstance(a[0], (int, float)) and math.isfinite(a[0]),
                          'POSITIVE_INFINITY': math.inf, 'NEGATIVE_INFINITY': -math.inf}),
            'Boolean': Builtin(boolean, 'Boolean'),
            'Math': mk({'max': mmax, 'min': mmin, 'round': lambda t, a: math.floor(a[0] + 0.5),
                        'floor': lambda t, a: math.floor(a[0]), 'ceil': lambda t, a: math.ceil(a[0]),
                        'abs': lambda t, a: abs(a[0])}),
            'Set': Builtin(lambda this, args: Unknown('Set()'), 'Set'),
            'Map': Builtin(lambda this, args: Unknown('Map()'), 'Map'),
            'RegExp': Builtin(lambda this, args: Unknown('RegExp()'), 'RegExp'),
            'Infinity': math.inf,
            'NaN': math.nan,
            'undefined': Undefined,
        }
        return g

    def global_(self, name):
        if name in self.globals:
            return self.globals[name]
        return Unknown(f'global {name}')

    # --- scope
    def lookup(self, name, env):
        e = env
        while e is not None:
            if name in e.vars:
                return e.vars[name]
            if e.parent is None:
                return e.mod.lookup(name, self)
            e = e.parent
        return Unknown(f'unbound {name}')

    # --- evaluation
    def eval(self, node, env):
        m = getattr(self, 'ev_' + node.t, None)
        if m is None:
            return Unknown(f'node {node.t}')
        return m(node, env)

    def ev_lit(self, n, env):
        return n.a[0]

    def ev_id(self, n, env):
        return self.lookup(n.a[0], env)

    def ev_unknown(self, n, env):
        return Unknown(n.a[0])

    def ev_this(self, n, env):
        e = env
        while e is not None:
            if 'this' in e.vars:
                return e.vars['this']
            e = e.parent
        return Unknown('this')

    def ev_regex(self, n, env):
        return RegExpVal(n.a[0])

    def ev_tpl(self, n, env):
        out = []
        for idx, p in enumerate(n.a[0]):
            if idx % 2 == 0:
                out.append(p)
            else:
                v = self.eval(p, env)
                if isinstance(v, Choice):
                    return Unknown('tpl choice')
                s = js_str(v)
                if isinstance(s, Unknown):
                    return Unknown(f'tpl: {s.why}')
                out.append(s)
        return ''.join(out)

    def ev_tagged(self, n, env):
        return Unknown('tagged template')

    def ev_arr(self, n, env):
        return self.eval_items(n.a[0], env, iterated, 'spread in array')

    def eval_items(self, nodes, env, spread, unknown):
        """The values of arguments or of an array's elements; a spread one's
        value goes in as the list `spread` makes of it (None: it cannot, and
        the whole is Unknown(unknown))."""
        out = []
        for x in nodes:
            if x.t != 'spread':
                out.append(self.eval(x, env))
                continue
            items = spread(self.eval(x.a[0], env))
            if items is None:
                return Unknown(unknown)
            out.extend(items)
        return out

    def ev_obj(self, n, env):
        o = JSObj()
        for p in n.a[0]:
            if p[0] == 'spread':
                v = self.eval(p[1], env)
                if isinstance(v, dict):
                    if v.getters:
                        for k in v.getters:
                            o[k] = self.get_prop(v, k)
                    o.update(v)
                elif v is None or v is Undefined or v is False or isinstance(v, (int, float, str)) and not v:
                    pass
                elif isinstance(v, Unknown):
                    o['__unknown_spread__'] = v
                else:
                    pass
                continue
            kind, keyn, valn, computed = p
            key = self.eval(keyn, env) if computed else keyn.a[0]
            if not isinstance(key, str):
                key = js_str(key)
                if isinstance(key, Unknown):
                    continue
            if kind == 'get':
                if o.getters is None:
                    o.getters = {}
                o.getters[key] = Func(valn, env, env.mod)
                o.pop(key, None)
            elif kind == 'set':
                continue
            else:
                if valn.t == 'func':
                    o[key] = Func(valn, env, env.mod)
                else:
                    o[key] = self.eval(valn, env)
                if o.getters and key in o.getters:
                    del o.getters[key]
        return o

    def ev_func(self, n, env):
        return Func(n, env, env.mod)

    def ev_class(self, n, env):
        return ClassVal(n, env, env.mod)

    def ev_import_meta(self, n, env):
        return ImportMeta()

    def ev_dyn_import(self, n, env):
        return Unknown('dynamic import')

    def ev_seq(self, n, env):
        v = Undefined
        for x in n.a[0]:
            v = self.eval(x, env)
        return v

    def ev_spread(self, n, env):
        return Unknown('spread')

    def ev_default(self, n, env):
        return Unknown('default')

    def ev_pattern(self, n, env):
        return Unknown('pattern')

    def ev_assign(self, n, env):
        op, target, valn = n.a
        if target.t == 'id':
            name = target.a[0]
            e = env
            while e is not None and e.parent is not None:
                if name in e.vars:
                    break
                e = e.parent
            if e is None or e.parent is None:
                # module-level or unknown: don't mutate, just evaluate
                cur = self.lookup(name, env) if op != '=' else Undefined
                return self._assign_val(op, cur, valn, env)
            cur = e.vars[name]
            v = self._assign_val(op, cur, valn, env)
            e.vars[name] = v
            return v
        if target.t in ('member', 'index'):
            obj = self.eval(target.a[0], env)
            key = target.a[1] if target.t == 'member' else self.eval(target.a[1], env)
            if isinstance(obj, JSObj) and isinstance(key, str):
                cur = obj.get(key, Undefined)
                v = self._assign_val(op, cur, valn, env)
                obj[key] = v
                return v
            return self.eval(valn, env)
        return self.eval(valn, env)

    def _assign_val(self, op, cur, valn, env):
        if op == '=':
            return self.eval(valn, env)
        if op == '??=':
            if cur is None or cur is Undefined:
                return self.eval(valn, env)
            return cur
        if op == '||=':
            try:
                return cur if truthy(cur) else self.eval(valn, env)
            except Indeterminate:
                return Unknown('||=')
        if op == '&&=':
            try:
                return self.eval(valn, env) if truthy(cur) else cur
            except Indeterminate:
                return Unknown('&&=')
        return self.binop(op[:-1], cur, self.eval(valn, env))

    def ev_update(self, n, env):
        op, target, prefix = n.a
        cur = self.eval(target, env)
        if not isinstance(cur, (int, float)) or isinstance(cur, bool):
            return Unknown('update')
        new = cur + 1 if op == '++' else cur - 1
        if target.t == 'id':
            self._assign_to(target, new, env)
        elif target.t in ('member', 'index'):
            obj = self.eval(target.a[0], env)
            key = target.a[1] if target.t == 'member' else js_str(self.eval(target.a[1], env))
            if isinstance(obj, JSObj) and isinstance(key, str):
                obj[key] = new
        return new if prefix else cur

    def ev_cond(self, n, env):
        t = self.eval(n.a[0], env)
        try:
            b = truthy(t)
        except Indeterminate:
            a1 = self.eval(n.a[1], env)
            a2 = self.eval(n.a[2], env)
            return make_choice(n.a[0], t, a1, a2)
        return self.eval(n.a[1] if b else n.a[2], env)

    def ev_logic(self, n, env):
        op, an, bn = n.a
        a = self.eval(an, env)
        if op == '??':
            if isinstance(a, Unknown) and not LENIENT['on']:
                return Unknown('??')
            if isinstance(a, Unknown):
                return self.eval(bn, env)
            if a is None or a is Undefined:
                return self.eval(bn, env)
            return a
        try:
            t = truthy(a)
        except Indeterminate:
            return Unknown(op)
        if op == '&&':
            return self.eval(bn, env) if t else a
        return a if t else self.eval(bn, env)

    def ev_unary(self, n, env):
        op, xn = n.a
        if op == 'void':
            return Undefined
        if op == 'delete':
            if xn.t in ('member', 'index'):
                obj = self.eval(xn.a[0], env)
                key = xn.a[1] if xn.t == 'member' else js_str(self.eval(xn.a[1], env))
                if isinstance(obj, JSObj) and isinstance(key, str):
                    obj.pop(key, None)
                    return True
            return Unknown('delete')
        if op == 'typeof':
            if xn.t == 'id':
                v = self.lookup(xn.a[0], env)
            else:
                v = self.eval(xn, env)
            return typeof(v)
        v = self.eval(xn, env)
        if op == '!':
            try:
                return not truthy(v)
            except Indeterminate:
                return Unknown('!')
        if op == '-':
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return -v
            return Unknown('-')
        if op == '+':
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return v
            return Unknown('+')
        if op == 'await':
            return v
        return Unknown(op)

    def binop(self, op, a, b):
        if op in ('===', '==', '!==', '!=') and LENIENT['on'] and not isinstance(a, Choice) and not isinstance(b, Choice):
            r = js_eq(a, b)
            return r if op in ('===', '==') else not r
        if isinstance(a, Unknown) or isinstance(b, Unknown) or isinstance(a, Choice) or isinstance(b, Choice):
            return Unknown(f'binop {op}')
        if op == '+':
            if isinstance(a, str) or isinstance(b, str) or isinstance(a, list) or isinstance(b, list):
                sa, sb = js_str(a), js_str(b)
                if isinstance(sa, Unknown) or isinstance(sb, Unknown):
                    return Unknown('+str')
                return sa + sb
            if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                return a + b
            return Unknown('+')
        if op in ('===', '=='):
            return js_eq(a, b)
        if op in ('!==', '!='):
            r = js_eq(a, b)
            return r if isinstance(r, Unknown) else not r
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            try:
                if op == '-':
                    return a - b
                if op == '*':
                    return a * b
                if op == '/':
                    r = a / b
                    return int(r) if isinstance(r, float) and r.is_integer() else r
                if op == '%':
                    return math.fmod(a, b)
                if op == '**':
                    return a ** b
                if op == '<':
                    return a < b
                if op == '>':
                    return a > b
                if op == '<=':
                    return a <= b
                if op == '>=':
                    return a >= b
                if op == '|':
                    return int(a) | int(b)
                if op == '&':
                    return int(a) & int(b)
                if op == '<<':
                    return int(a) << int(b)
                if op == '>>':
                    return int(a) >> int(b)
            except ZeroDivisionError:
                return math.inf
        if op == 'in':
            if isinstance(b, dict) and isinstance(a, str):
                return a in b or bool(b.getters and a in b.getters)
        if op in ('<', '>', '<=', '>=') and isinstance(a, str) and isinstance(b, str):
            return {'<': a < b, '>': a > b, '<=': a <= b, '>=': a >= b}[op]
        return Unknown(f'binop {op}')

    def ev_bin(self, n, env):
        op, an, bn = n.a
        a = self.eval(an, env)
        b = self.eval(bn, env)
        if op == 'instanceof':
            return Unknown('instanceof')
        return self.binop(op, a, b)

    def ev_member(self, n, env):
        objn, name, opt = n.a
        obj = self.eval(objn, env)
        if opt and (obj is None or obj is Undefined):
            return Undefined
        return self.get_prop(obj, name)

    def ev_index(self, n, env):
        objn, keyn, opt = n.a
        obj = self.eval(objn, env)
        if opt and (obj is None or obj is Undefined):
            return Undefined
        key = self.eval(keyn, env)
        if isinstance(key, (int, float)) and not isinstance(key, bool) and isinstance(obj, (list, str)):
            k = int(key)
            return obj[k] if 0 <= k < len(obj) else Undefined
        if isinstance(key, Unknown):
            return Unknown('index')
        ks = js_str(key)
        if isinstance(ks, Unknown):
            return ks
        return self.get_prop(obj, ks)

    # What a lenient reading assumes of runtime state it cannot see: an
    # interactive terminal session on a local machine; anything else unset.
    RUNTIME_ASSUMPTIONS = {'isInteractive': True, 'diskless': False}

    def get_prop(self, obj, name):
        if isinstance(obj, Unknown):
            if LENIENT['on'] and name in self.RUNTIME_ASSUMPTIONS:
                v = self.RUNTIME_ASSUMPTIONS[name]
                return Builtin(lambda this, args: v, name)
            return Unknown(f'{obj.why}.{name}')
        if self.hooks is not None:
            r = self.hooks.get_prop(self, obj, name)
            if r is not NotImplemented:
                return r
        if isinstance(obj, JSObj):
            if obj.getters and name in obj.getters:
                return self.call(obj.getters[name], [], this=obj)
            if name in obj:
                return obj[name]
            if '__unknown_spread__' in obj:
                return Unknown(f'prop {name} maybe from spread')
            return array_or_obj_method(self, obj, name)
        if isinstance(obj, dict):
            return obj.get(name, Undefined)
        if isinstance(obj, Namespace):
            return obj.mod.export(name, self)
        if isinstance(obj, str):
            if name == 'length':
                return len(obj)
            return string_method(self, obj, name)
        if isinstance(obj, list):
            if name == 'length':
                return len(obj)
            return array_or_obj_method(self, obj, name)
        if isinstance(obj, RegExpVal):
            if name == 'source':
                return obj.source
            if name == 'flags':
                return obj.flags
            if name == 'test':
                def test(this, args):
                    s = args[0] if args else Undefined
                    if not isinstance(s, str):
                        return Unknown('regex test')
                    try:
                        return re.search(obj.source, s, re.I if 'i' in obj.flags else 0) is not None
                    except re.error:
                        return Unknown('regex')
                return Builtin(test, 'test')
        if isinstance(obj, JSSet):
            return obj.prop(self, name)
        if isinstance(obj, JSMap):
            return obj.prop(self, name)
        if isinstance(obj, ImportMeta):
            if name == 'require':
                return Builtin(lambda this, args: self.require(args[0]), 'require')
        if isinstance(obj, Func) and name in ('call', 'apply', 'bind'):
            f = obj
            if name == 'call':
                return Builtin(lambda this, args: self.call(f, args[1:], this=args[0] if args else Undefined), 'call')
            if name == 'bind':
                return Builtin(lambda this, args: obj, 'bind')
        if obj is None or obj is Undefined:
            return Unknown(f'prop {name} of {js_str(obj)}')
        if isinstance(obj, Choice):
            return obj.map(lambda o: self.get_prop(o, name))
        return Unknown(f'prop {name} of {type(obj).__name__}')

    def require(self, name):
        m = self.bundle.module(name)
        if m is None:
            return Unknown(f'require {name}')
        return Namespace(m)

    def ev_call(self, n, env):
        calleen, argns, opt = n.a
        this = Undefined
        if calleen.t in ('member', 'index'):
            obj = self.eval(calleen.a[0], env)
            if calleen.a[2] and (obj is None or obj is Undefined):
                return Undefined
            if calleen.t == 'member':
                key = calleen.a[1]
            else:
                key = js_str(self.eval(calleen.a[1], env))
            if LENIENT['on'] and key in self.RUNTIME_ASSUMPTIONS and not argns:
                return self.RUNTIME_ASSUMPTIONS[key]
            if self.hooks is not None:
                r = self.hooks.method_call(self, obj, key, argns, env)
                if r is not NotImplemented:
                    return r
            f = self.get_prop(obj, key) if not isinstance(key, Unknown) else key
            this = obj
        else:
            f = self.eval(calleen, env)
        if opt and (f is None or f is Undefined):
            return Undefined
        if self.hooks is not None:
            r = self.hooks.pre_call(self, f, argns, env)
            if r is not NotImplemented:
                return r
        args = self.eval_args(argns, env)
        if isinstance(args, Unknown):
            return args
        return self.call(f, args, this=this)

    def eval_args(self, argns, env):
        return self.eval_items(argns, env, lambda v: v if isinstance(v, list) else None, 'spread args')

    def ev_new(self, n, env):
        calleen, argns = n.a
        c = self.eval(calleen, env)
        args = self.eval_args(argns, env)
        if isinstance(args, Unknown):
            return args
        if self.hooks is not None:
            r = self.hooks.on_new(self, c, args)
            if r is not NotImplemented:
                return r
        if isinstance(c, ClassVal):
            return self.instantiate(c, args)
        if isinstance(c, Builtin) and c.name == 'Set':
            init = args[0] if args else Undefined
            if init is Undefined or init is None:
                return JSSet([])
            if isinstance(init, (list, str)):
                return JSSet(list(init))
            if isinstance(init, JSSet):
                return JSSet(list(init.items))
            return Unknown('new Set(?)')
        if isinstance(c, Builtin) and c.name == 'Map':
            init = args[0] if args else Undefined
            m = JSMap()
            if isinstance(init, list):
                for p in init:
                    if isinstance(p, list) and len(p) >= 2:
                        m.set(p[0], p[1])
                    else:
                        return Unknown('new Map(?)')
            elif init is not Undefined and init is not None:
                return Unknown('new Map(?)')
            return m
        if isinstance(c, Builtin) and c.name == 'RegExp':
            src_ = args[0] if args else ''
            flags = args[1] if len(args) > 1 and isinstance(args[1], str) else ''
            if isinstance(src_, RegExpVal):
                src_ = src_.source
            if not isinstance(src_, str):
                return Unknown('new RegExp(?)')
            return RegExpVal('/' + src_ + '/' + flags)
        return Unknown(f'new {c!r}')

    def instantiate(self, c, args):
        chain = []
        k = c
        while isinstance(k, ClassVal) and len(chain) < 20:
            chain.append(k)
            sup = k.node.a[1]
            k = self.eval(sup, k.env) if sup is not None else None
        if k is not None and not isinstance(k, ClassVal):
            return Unknown('new: unknown superclass')
        obj = JSObj()
        ctor = None
        for cls in reversed(chain):
            for kind, keyn, valn, static in cls.node.a[2]:
                if static or keyn.t != 'lit':
                    continue
                key = keyn.a[0]
                if kind == 'field':
                    scope = Scope(cls.env, cls.mod, {'this': obj})
                    obj[key] = self.eval(valn, scope) if valn is not None else Undefined
                elif kind == 'get':
                    if obj.getters is None:
                        obj.getters = {}
                    obj.getters[key] = Func(valn, cls.env, cls.mod)
                elif kind in ('method', 'async'):
                    if key == 'constructor':
                        ctor = Func(valn, cls.env, cls.mod)
                    else:
                        obj[key] = Func(valn, cls.env, cls.mod)
        if ctor is not None:
            self.call_func(ctor, args, this=obj)
        return obj

    def call(self, f, args, this=Undefined):
        if isinstance(f, Builtin):
            try:
                return f.fn(this, args)
            except (IndexError, TypeError, KeyError, ValueError, AttributeError):
                return Unknown(f'builtin {f.name} failed')
        if isinstance(f, Func):
            return self.call_func(f, args, this)
        if isinstance(f, Choice):
            return f.map(lambda g: self.call(g, args, this))
        if isinstance(f, Unknown):
            return Unknown(f'call {f.why}')
        return Unknown(f'call non-function {type(f).__name__}')

    def call_func(self, f, args, this=Undefined):
        if self.depth > self.MAX_DEPTH:
            return Unknown('depth')
        self.calls += 1
        if self.calls > self.budget:
            return Unknown('budget')
        node = f.node
        name, params, body, is_arrow, is_expr, is_async = node.a
        if is_async == 'gen':
            return Unknown('generator')
        scope = Scope(f.env, f.mod)
        if not is_arrow:
            scope.vars['this'] = this
            scope.vars['arguments'] = list(args)
        for i, p in enumerate(params):
            if p.t == 'id':
                scope.vars[p.a[0]] = args[i] if i < len(args) else Undefined
            elif p.t == 'default':
                v = args[i] if i < len(args) else Undefined
                if v is Undefined:
                    v = self.eval(p.a[1], scope)
                self.bind_pattern(p.a[0], v, scope)
            elif p.t == 'rest':
                self.bind_pattern(p.a[0], list(args[i:]), scope)
            else:
                self.bind_pattern(p, args[i] if i < len(args) else Undefined, scope)
        self.depth += 1
        try:
            if is_expr:
                return self.eval(body, scope)
            self.hoist(body, scope)
            try:
                self.exec_block(body, scope)
            except ReturnSignal as r:
                return r.v
            except ThrowSignal:
                return Unknown('throws')
            except LoopSignal:
                return Unknown('stray break')
            return Undefined
        except RecursionError:
            return Unknown('recursion')
        finally:
            self.depth -= 1

    def bind_pattern(self, p, v, scope):
        if p.t == 'id':
            scope.vars[p.a[0]] = v
            return
        if p.t == 'default':
            if v is Undefined:
                v = self.eval(p.a[1], scope)
            self.bind_pattern(p.a[0], v, scope)
            return
        if p.t == 'rest':
            self.bind_pattern(p.a[0], Unknown('rest'), scope)
            return
        if p.t == 'pattern':
            lit = p.a[0]
            if lit.t == 'obj':
                for prop in lit.a[0]:
                    if prop[0] == 'spread':
                        if prop[1].t == 'id':
                            scope.vars[prop[1].a[0]] = Unknown('rest')
                        continue
                    _, keyn, valn, computed = prop
                    key = keyn.a[0] if not computed else js_str(self.eval(keyn, scope))
                    sub = self.get_prop(v, key) if not isinstance(key, Unknown) else Unknown('key')
                    self.bind_target(valn, sub, scope)
            elif lit.t == 'arr':
                for i, el in enumerate(lit.a[0]):
                    if el.t == 'spread':
                        self.bind_target(el.a[0], Unknown('rest'), scope)
                        continue
                    sub = v[i] if isinstance(v, list) and i < len(v) else (Undefined if isinstance(v, list) else Unknown('arr pat'))
                    self.bind_target(el, sub, scope)
            return

    def bind_target(self, node, v, scope):
        if node.t == 'id':
            scope.vars[node.a[0]] = v
        elif node.t == 'default':
            if v is Undefined:
                v = self.eval(node.a[1], scope)
            self.bind_target(node.a[0], v, scope)
        elif node.t in ('obj', 'arr'):
            self.bind_pattern(Node('pattern', node), v, scope)
        elif node.t == 'assign':
            if v is Undefined:
                v = self.eval(node.a[2], scope)
            self.bind_target(node.a[1], v, scope)

    def hoist(self, stmts, scope):
        for s in stmts:
            if s.t == 'funcdecl':
                f = s.a[0]
                scope.vars[f.a[0]] = Func(f, scope, scope.mod)

    def exec_block(self, stmts, scope):
        for idx, s in enumerate(stmts):
            try:
                self.exec(s, scope)
            except _IfUnknown as u:
                if u.stmt is not s:
                    raise ReturnSignal(Unknown('nested if'))
                rest = stmts[idx + 1:]
                outs = []
                for branch in (s.a[1], s.a[2]):
                    r = _NoReturn
                    try:
                        if branch is not None:
                            self.exec(branch, scope)
                        self.exec_block(rest, scope)
                    except ReturnSignal as rs:
                        r = rs.v
                    except ThrowSignal:
                        r = Unknown('throws')
                    except _IfUnknown:
                        r = Unknown('nested if')
                    outs.append(Undefined if r is _NoReturn else r)
                raise ReturnSignal(make_choice(s.a[0], u.v, outs[0], outs[1]))

    def loop_test(self, test, scope):
        """Whether a loop goes on (undecidable: the function's result is Unknown)."""
        c = self.eval(test, scope)
        try:
            return truthy(c)
        except Indeterminate:
            raise ReturnSignal(Unknown('loop test'))

    def loop_body(self, body, scope):
        """Runs a loop's body once: False when it breaks out."""
        try:
            self.exec(body, scope)
        except LoopSignal as ls:
            if ls.kind == 'break':
                return False
        return True

    def exec(self, s, scope):
        t = s.t
        if t == 'expr':
            self.eval(s.a[0], scope)
        elif t == 'var':
            for b, init in s.a[1]:
                v = self.eval(init, scope) if init is not None else Undefined
                if b.t == 'id':
                    scope.vars[b.a[0]] = v
                else:
                    self.bind_pattern(b, v, scope)
        elif t == 'return':
            raise ReturnSignal(self.eval(s.a[0], scope) if s.a[0] is not None else Undefined)
        elif t == 'if':
            c = self.eval(s.a[0], scope)
            try:
                b = truthy(c)
            except Indeterminate:
                raise _IfUnknown(c, s)
            if b:
                self.exec(s.a[1], scope)
            elif s.a[2] is not None:
                self.exec(s.a[2], scope)
        elif t == 'block':
            # blocks share function scope for var; keep simple: same scope
            self.hoist(s.a[0], scope)
            self.exec_block(s.a[0], scope)
        elif t == 'funcdecl':
            pass
        elif t == 'throw':
            raise ThrowSignal()
        elif t == 'try':
            try:
                self.exec_block(s.a[0], scope)
            except ThrowSignal:
                if s.a[1] is not None:
                    self.exec_block(s.a[1], scope)
            if s.a[2] is not None:
                self.exec_block(s.a[2], scope)
        elif t == 'classdecl':
            c = s.a[0]
            scope.vars[c.a[0]] = ClassVal(c, scope, scope.mod)
        elif t == 'empty':
            pass
        elif t in ('break', 'continue'):
            raise LoopSignal(t, s.a[0])
        elif t == 'forof' or t == 'forin':
            b, rightn, body = s.a
            it = self.eval(rightn, scope)
            if t == 'forin':
                seq = list(it.keys()) if isinstance(it, dict) else (None if not isinstance(it, list) else [str(i) for i in range(len(it))])
            else:
                seq = iterated(it)
            if seq is None:
                raise ReturnSignal(Unknown(f'{t} over {type(it).__name__}'))
            for x in seq:
                if b.t == 'target':
                    self._assign_to(b.a[0], x, scope)
                else:
                    self.bind_pattern(b, x, scope)
                if not self.loop_body(body, scope):
                    break
        elif t == 'for':
            init, test, update, body = s.a
            if init is not None:
                self.exec(init, scope)
            for _ in loop_rounds():
                if test is not None and not self.loop_test(test, scope):
                    break
                if not self.loop_body(body, scope):
                    break
                if update is not None:
                    self.eval(update, scope)
        elif t in ('while', 'dowhile'):
            if t == 'while':
                test, body = s.a
            else:
                body, test = s.a
            first = t == 'dowhile'
            for _ in loop_rounds():
                if not first and not self.loop_test(test, scope):
                    break
                first = False
                if not self.loop_body(body, scope):
                    break
        elif t == 'switch':
            disc = self.eval(s.a[0], scope)
            matched = False
            try:
                for test, body in s.a[1]:
                    if not matched:
                        if test is None:
                            continue
                        r = js_eq(disc, self.eval(test, scope))
                        if isinstance(r, Unknown):
                            raise ReturnSignal(Unknown('switch'))
                        matched = r
                    if matched:
                        self.exec_block(body, scope)
                if not matched:
                    seen_default = False
                    for test, body in s.a[1]:
                        if test is None:
                            seen_default = True
                        if seen_default:
                            self.exec_block(body, scope)
            except LoopSignal as ls:
                if ls.kind != 'break':
                    raise
        else:
            raise ReturnSignal(Unknown(f'statement {t}'))

    def _assign_to(self, target, v, scope):
        if target.t == 'id':
            e = scope
            name = target.a[0]
            while e is not None and e.parent is not None:
                if name in e.vars:
                    e.vars[name] = v
                    return
                e = e.parent
            scope.vars[name] = v
        elif target.t in ('obj', 'arr'):
            self.bind_pattern(Node('pattern', target), v, scope)

class _Sentinel:
    def __init__(self, n):
        self.n = n

    def __repr__(self):
        return self.n


_NoReturn = _Sentinel('noreturn')


class Choice:
    """A value that depends on a condition the evaluator could not decide."""

    def __init__(self, test_node, test_val, a, b):
        self.test_node, self.test_val, self.a, self.b = test_node, test_val, a, b

    def map(self, fn):
        return make_choice(self.test_node, self.test_val, fn(self.a), fn(self.b))

    def __repr__(self):
        return f'<choice {self.test_val!r}: {self.a!r} | {self.b!r}>'


def resolve_choice(c):
    """Lenient reading of a choice: its condition is taken as false."""
    while isinstance(c, Choice):
        c = c.b
    return c


def make_choice(test_node, test_val, a, b, scope=None, interp=None):
    if a is b:
        return a
    if isinstance(a, (str, int, float, bool)) and type(a) is type(b) and a == b:
        return a
    return Choice(test_node, test_val, a, b)


class ImportMeta:
    pass


def _key(v):
    return (type(v).__name__, v) if isinstance(v, (str, int, float, bool)) or v is None or v is Undefined else ('id', id(v))


class JSSet:
    def __init__(self, items):
        self.items = []
        self.keys = set()
        for x in items:
            self.add(x)

    def add(self, x):
        k = _key(x)
        if k not in self.keys:
            self.keys.add(k)
            self.items.append(x)
        return self

    def prop(self, interp, name):
        if name == 'size':
            return len(self.items)
        if name == 'has':
            return Builtin(lambda this, args: _key(args[0]) in self.keys if not isinstance(args[0], Unknown) else Unknown('has'), 'has')
        if name == 'add':
            return Builtin(lambda this, args: self.add(args[0]), 'add')
        if name in ('values', 'keys'):
            return Builtin(lambda this, args: list(self.items), name)
        if name == 'forEach':
            return Builtin(lambda this, args: [interp.call(args[0], [x, x]) for x in self.items] and Undefined, 'forEach')
        return Unknown(f'Set.{name}')


class JSMap:
    def __init__(self):
        self.items = []
        self.index = {}

    def set(self, k, v):
        kk = _key(k)
        if kk in self.index:
            self.items[self.index[kk]] = (k, v)
        else:
            self.index[kk] = len(self.items)
            self.items.append((k, v))
        return self

    def get(self, k):
        i = self.index.get(_key(k))
        return self.items[i][1] if i is not None else Undefined

    def prop(self, interp, name):
        if name == 'size':
            return len(self.items)
        if name == 'get':
            return Builtin(lambda this, args: self.get(args[0]) if not isinstance(args[0], Unknown) else Unknown('get'), 'get')
        if name == 'has':
            return Builtin(lambda this, args: _key(args[0]) in self.index, 'has')
        if name == 'set':
            return Builtin(lambda this, args: self.set(args[0], args[1]), 'set')
        if name == 'keys':
            return Builtin(lambda this, args: [k for k, v in self.items], 'keys')
        if name == 'values':
            return Builtin(lambda this, args: [v for k, v in self.items], 'values')
        if name == 'entries':
            return Builtin(lambda this, args: [[k, v] for k, v in self.items], 'entries')
        return Unknown(f'Map.{name}')


def to_py(v):
    if isinstance(v, dict):
        return {k: to_py(x) for k, x in v.items()}
    if isinstance(v, list):
        return [to_py(x) for x in v]
    if v is Undefined:
        return None
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    raise ValueError('not plain')


def string_method(interp, s, name):
    def b(fn):
        return Builtin(lambda this, args: fn(*args), name)
    if name == 'trim':
        return b(lambda: s.strip())
    if name == 'trimEnd':
        return b(lambda: s.rstrip())
    if name == 'trimStart':
        return b(lambda: s.lstrip())
    if name == 'toLowerCase':
        return b(lambda: s.lower())
    if name == 'toUpperCase':
        return b(lambda: s.upper())
    if name in ('replace', 'replaceAll'):
        def rep(pat, repl):
            if isinstance(pat, str) and isinstance(repl, str):
                return s.replace(pat, repl, -1 if name == 'replaceAll' else 1)
            if isinstance(pat, RegExpVal) and isinstance(repl, str):
                try:
                    flags = re.I if 'i' in pat.flags else 0
                    count = 0 if 'g' in pat.flags else 1
                    r = repl.replace('\\', '\\\\').replace('$&', '\\g<0>')
                    r = re.sub(r'\$(\d)', r'\\\1', r)
                    return re.sub(pat.source, r, s, count=count, flags=flags)
                except re.error:
                    return Unknown('regex')
            return Unknown('replace')
        return b(rep)
    if name == 'split':
        return b(lambda sep=Undefined, *r: s.split(sep) if isinstance(sep, str) and sep else (list(s) if sep == '' else Unknown('split')))
    if name == 'includes':
        return b(lambda x, *r: isinstance(x, str) and x in s)
    if name == 'startsWith':
        return b(lambda x, *r: isinstance(x, str) and s.startswith(x))
    if name == 'endsWith':
        return b(lambda x, *r: isinstance(x, str) and s.endswith(x))
    if name == 'slice':
        def sl(a=0, e=Undefined):
            a = int(a)
            return s[a:] if e is Undefined else s[a:int(e)]
        return b(sl)
    if name == 'repeat':
        return b(lambda k: s * int(k))
    if name == 'concat':
        return b(lambda *xs: s + ''.join(js_str(x) for x in xs))
    if name == 'indexOf':
        return b(lambda x, *r: s.find(x))
    if name == 'padStart':
        return b(lambda k, c=' ': s.rjust(int(k), c[0] if c else ' '))
    if name == 'padEnd':
        return b(lambda k, c=' ': s.ljust(int(k), c[0] if c else ' '))
    if name == 'toString':
        return b(lambda *r: s)
    if name == 'at':
        return b(lambda k: s[int(k)] if -len(s) <= int(k) < len(s) else Undefined)
    if name == 'charAt':
        return b(lambda k: s[int(k)] if 0 <= int(k) < len(s) else '')
    return Unknown(f'string method {name}')


def flattened(xs):
    """The values in xs, those that are arrays spread one level (concat,
    flatMap)."""
    out = []
    for x in xs:
        if isinstance(x, list):
            out.extend(x)
        else:
            out.append(x)
    return out


def array_or_obj_method(interp, a, name):
    if isinstance(a, list):
        def b(fn):
            return Builtin(lambda this, args: fn(*args), name)
        if name == 'map':
            return b(lambda f, *r: [interp.call(f, [x, i, a]) for i, x in enumerate(a)])
        if name == 'flatMap':
            return b(lambda f, *r: flattened(interp.call(f, [x, i, a]) for i, x in enumerate(a)))
        if name == 'filter':
            def flt(f, *r):
                out = []
                for i, x in enumerate(a):
                    try:
                        if truthy(interp.call(f, [x, i, a])):
                            out.append(x)
                    except Indeterminate:
                        return Unknown('filter')
                return out
            return b(flt)
        if name == 'join':
            def jn(sep=','):
                parts = [js_str(x) if x is not None and x is not Undefined else '' for x in a]
                if any(isinstance(p, Unknown) for p in parts):
                    return Unknown('join')
                return sep.join(parts)
            return b(jn)
        if name == 'includes':
            return b(lambda x, *r: any(js_eq(x, y) is True for y in a))
        if name == 'concat':
            return b(lambda *xs: flattened([a, *xs]))
        if name == 'slice':
            def sl(s=0, e=Undefined):
                return a[int(s):] if e is Undefined else a[int(s):int(e)]
            return b(sl)
        if name in ('some', 'every'):
            def quantified(f, *r):
                test = any if name == 'some' else all
                try:
                    return test(truthy(interp.call(f, [x, i, a])) for i, x in enumerate(a))
                except Indeterminate:
                    return Unknown(name)
            return b(quantified)
        if name == 'find':
            def find(f, *r):
                try:
                    for i, x in enumerate(a):
                        if truthy(interp.call(f, [x, i, a])):
                            return x
                except Indeterminate:
                    return Unknown('find')
                return Undefined
            return b(find)
        if name == 'indexOf':
            return b(lambda x, *r: next((i for i, y in enumerate(a) if js_eq(x, y) is True), -1))
        if name in ('toSorted', 'sort'):
            def srt(f=Undefined):
                if f is Undefined and all(isinstance(x, str) for x in a):
                    return sorted(a)
                return Unknown('sort')
            return b(srt)
        if name == 'at':
            return b(lambda k: a[int(k)] if -len(a) <= int(k) < len(a) else Undefined)
        if name == 'push':
            def push(*xs):
                a.extend(xs)
                return len(a)
            return b(push)
        if name == 'reduce':
            def red(f, init=Undefined):
                acc = init
                for i, x in enumerate(a):
                    acc = interp.call(f, [acc, x, i, a])
                return acc
            return b(red)
        return Unknown(f'array method {name}')
    return Undefined


# ======================================================================
# the bundle's schema library and its JSON Schema converter
# ======================================================================
WRAPPERS = {'optional', 'nullable', 'nonoptional', 'default', 'prefault', 'catch', 'readonly'}


class Schema:
    def __init__(self, type_, **kw):
        self.type = type_
        self.checks = []
        self.metadata = {}
        self.inner = None
        self.shape = None
        self.others = None  # None: strip; Schema: catchall
        self.element = None
        self.options = None
        self.values = None
        self.entries = None
        self.items = None
        self.rest = None
        self.key = None
        self.value = None
        self.partial = False
        self.fallback = Undefined
        self.getter = None
        self.lazy_built = None
        self.in_ = None
        self.out = None
        self.left = None
        self.right = None
        self.discriminator = None
        self.prefix = None
        self.integer = None
        for k, v in kw.items():
            setattr(self, k, v)

    def copy(self, **kw):
        s = Schema.__new__(Schema)
        s.__dict__.update(self.__dict__)
        s.checks = list(self.checks)
        s.metadata = dict(self.metadata)
        for k, v in kw.items():
            setattr(s, k, v)
        return s

    def __repr__(self):
        if self.type == 'object':
            return f'<object {list(self.shape or {})}>'
        if self.type in WRAPPERS:
            return f'<{self.type} {self.inner!r}>'
        return f'<{self.type}>'

    # optin / optout as the library defines them
    @property
    def optin(self):
        t = self.type
        if t == 'optional':
            return self.inner.optin or 'optional'
        if t in ('default', 'prefault'):
            return 'defaulted'
        if t == 'catch':
            return self.inner.optin or 'optional'
        if t == 'nonoptional':
            return None
        if t in ('nullable', 'readonly'):
            return self.inner.optin
        if t == 'lazy':
            return self.resolve_lazy().optin
        if t == 'transform':
            return 'optional'
        if t == 'pipe':
            return self.in_.optin
        if t == 'union':
            ins = [o.optin for o in self.options]
            if 'defaulted' in ins:
                return 'defaulted'
            return next((x for x in ins if x), None)
        return None

    @property
    def optout(self):
        t = self.type
        if t == 'optional':
            return 'optional'
        if t in ('default', 'prefault', 'nonoptional'):
            return None
        if t in ('nullable', 'readonly', 'catch'):
            return self.inner.optout
        if t == 'lazy':
            return self.resolve_lazy().optout
        if t == 'pipe':
            return self.out.optout
        if t == 'union':
            return next((x for x in (o.optout for o in self.options) if x), None)
        return None

    def resolve_lazy(self):
        if self.lazy_built is None:
            self.lazy_built = self.getter()
        return self.lazy_built


def choice_all(c, pred):
    if isinstance(c, Choice):
        return choice_all(c.a, pred) and choice_all(c.b, pred)
    return pred(c)


def cmap(c, fn):
    if isinstance(c, Choice):
        return make_choice(c.test_node, c.test_val, cmap(c.a, fn), cmap(c.b, fn))
    return fn(c)


def is_schema(v):
    return isinstance(v, Schema)


def check_rule(c):
    if isinstance(c, dict):
        r = c.get('rule')
        if isinstance(r, dict):
            return r
        return c
    return None


class ZodHooks:
    """Interpreter hooks: zod classes become Schema values; tool definitions
    are captured instead of being run through the tool builder."""

    def __init__(self, bundle):
        self.bundle = bundle
        self.class_types = {}
        self.tool_defs = []
        self.warnings = []
        self.flags_defaulted = set()
        self.converter_cache = {}

    # class type from `get type(){return "x"}`, walking `extends`
    def class_type(self, interp, c, seen=0):
        if not isinstance(c, ClassVal) or seen > 20:
            return None
        key = id(c.node)
        if key in self.class_types:
            return self.class_types[key]
        t = None
        for kind, keyn, fn, static in c.node.a[2]:
            if kind == 'get' and not static and keyn.t == 'lit' and keyn.a[0] == 'type':
                body = fn.a[2]
                if len(body) == 1 and body[0].t == 'return' and body[0].a[0] is not None and body[0].a[0].t == 'lit':
                    t = body[0].a[0].a[0]
                break
        if t is None and c.node.a[1] is not None:
            sup = interp.eval(c.node.a[1], c.env)
            t = self.class_type(interp, sup, seen + 1)
        self.class_types[key] = t
        return t

    def is_zod_class(self, interp, c):
        return self.class_type(interp, c) is not None and 'ZodError' in c.mod.src

    def on_new(self, interp, c, args):
        if not isinstance(c, ClassVal):
            return NotImplemented
        t = self.class_type(interp, c)
        if t is None or 'ZodError' not in c.mod.src:
            return NotImplemented
        a = list(args) + [Undefined] * 4
        chk = [x for x in args if check_rule(x) is not None and isinstance(check_rule(x).get('kind'), str)]
        if t in ('string', 'number', 'boolean', 'unknown', 'any', 'custom', 'never', 'null', 'undefined'):
            s = Schema(t)
            for x in chk:
                s.checks.append(check_rule(x))
            return s
        if t == 'literal':
            return Schema('literal', values=a[0] if isinstance(a[0], list) else [a[0]])
        if t == 'enum':
            e = a[0]
            if isinstance(e, dict):
                opts = list(e.values())
            elif isinstance(e, list):
                opts = list(e)
            else:
                return Unknown('enum entries')
            return Schema('enum', entries=e, options=opts)
        if t == 'template_literal':
            return Schema('template_literal', prefix=a[0])
        if t == 'array':
            return Schema('array', element=a[0])
        if t == 'tuple':
            return Schema('tuple', items=a[0], rest=a[1] if is_schema(a[1]) else None)
        if t == 'record':
            return Schema('record', key=a[0], value=a[1], partial=a[2] is True)
        if t == 'object':
            if not isinstance(a[0], dict):
                return Unknown('object shape')
            return Schema('object', shape=dict(a[0]), others=a[1] if is_schema(a[1]) else None)
        if t == 'union':
            return Schema('union', options=a[0] if isinstance(a[0], list) else [])
        if t == 'intersection':
            return Schema('intersection', left=a[0], right=a[1])
        if t == 'lazy':
            f = a[0]
            return Schema('lazy', getter=lambda: interp.call(f, []))
        if t == 'transform':
            return Schema('transform', fallback=a[0])
        if t == 'pipe':
            return Schema('pipe', in_=a[0], out=a[1])
        if t in WRAPPERS:
            return Schema(t, inner=a[0], fallback=a[1])
        return Unknown(f'zod class {t}')

    def get_prop(self, interp, obj, name):
        if isinstance(obj, Schema):
            return self.schema_prop(interp, obj, name)
        if isinstance(obj, ToolDef):
            return obj.prop(interp, name)
        return NotImplemented

    def method_call(self, interp, obj, name, argns, env):
        if isinstance(obj, Choice) and choice_all(obj, is_schema):
            args = interp.eval_args(argns, env)
            return cmap(obj, lambda o: self.schema_method(interp, o, name, args))
        if isinstance(obj, Schema):
            args = interp.eval_args(argns, env)
            if isinstance(args, Unknown):
                return args
            return self.schema_method(interp, obj, name, args)
        return NotImplemented

    def wrap_tool(self, v, env=None):
        if isinstance(v, JSObj) and isinstance(v.get('name'), str) and (
                'registryToolId' in v or (v.getters and 'inputSchema' in v.getters)):
            td = ToolDef(v, env)
            self.tool_defs.append(td)
            return td
        return v

    def is_converter(self, f):
        if not isinstance(f, Func) or not f.name:
            return False
        key = id(f.node)
        r = self.converter_cache.get(key)
        if r is None:
            r = False
            m = f.mod
            if '"https://json-schema.org/draft/2020-12/schema"' in m.src:
                d = m.decls.get(f.name) if m.decls else None
                if d and d[0] == 'func':
                    s = m.toks[d[1]].s
                    body = m.src[s:s + 600]
                    r = 'json-schema.org/draft/2020-12/schema' in body
            self.converter_cache[key] = r
        return r

    def pre_call(self, interp, f, argns, env):
        if self.is_converter(f):
            args = interp.eval_args(argns, env)
            s = args[0] if args else Undefined
            if is_schema(s):
                try:
                    js = to_json_schema(s)
                except Unrepresentable as e:
                    return Unknown(f'unrepresentable: {e}')
                o = JSObj()
                o['$schema'] = 'https://json-schema.org/draft/2020-12/schema'
                o.update(_to_jsobj(js))
                return o
            return Unknown('converter on non-schema')
        # feature flags: f("tengu_...", default) -> default when not decidable
        if len(argns) >= 2 and argns[0].t == 'lit' and isinstance(argns[0].a[0], str) and argns[0].a[0].startswith('tengu_'):
            args = interp.eval_args(argns, env)
            if isinstance(args, Unknown):
                return args
            r = interp.call(f, args)
            if isinstance(r, Unknown) or isinstance(r, Choice):
                self.flags_defaulted.add(argns[0].a[0])
                d = args[1]
                if isinstance(d, (Func, Builtin)):
                    d = interp.call(d, [])
                return d
            return r
        # A call whose only argument is an object literal that defines a
        # tool (has registryToolId, or name + inputSchema) is a tool builder.
        if len(argns) == 1 and argns[0].t == 'obj':
            keys = set()
            getters = set()
            for p in argns[0].a[0]:
                if p[0] != 'spread' and not p[3] and p[1].t == 'lit':
                    keys.add(p[1].a[0])
                    if p[0] == 'get':
                        getters.add(p[1].a[0])
            has_spread = any(p[0] == 'spread' for p in argns[0].a[0])
            # the tool builder gets the definition with its inputSchema getter
            if 'inputSchema' in getters and ('name' in keys or has_spread):
                obj = interp.eval(argns[0], env)
                td = ToolDef(obj, env)
                self.tool_defs.append(td)
                return td
        return NotImplemented

    def schema_prop(self, interp, s, name):
        if name == 'shape' and s.type == 'object':
            o = JSObj()
            o.update(s.shape)
            return o
        if name == 'options':
            if s.type == 'enum':
                return list(s.options)
            if s.type == 'union':
                return list(s.options)
        if name == 'enum' and s.type == 'enum':
            o = JSObj()
            if isinstance(s.entries, dict):
                o.update(s.entries)
            return o
        if name == 'element' and s.type == 'array':
            return s.element
        if name == 'description':
            d = s.metadata.get('description')
            return d if isinstance(d, str) else Undefined
        if name == 'innerType' and s.inner is not None:
            return s.inner
        if name == 'type':
            return s.type
        if name in ('values',) and s.type == 'literal':
            return list(s.values)
        if name == 'value' and s.type == 'literal':
            return s.values[0]
        if name == '_zod':
            return Unknown('_zod')
        # a method reference (e.g. passed around): bind it
        return Builtin(lambda this, args: self.schema_method(interp, s, name, args), name)

    def schema_method(self, interp, s, name, args):
        a = list(args) + [Undefined] * 3
        t = s.type
        if name == 'describe':
            return s.copy(metadata={**s.metadata, 'description': a[0]})
        if name == 'meta':
            if isinstance(a[0], dict):
                return s.copy(metadata={**s.metadata, **a[0]})
            return dict(s.metadata)
        if name == 'optional':
            return Schema('optional', inner=s)
        if name == 'nullable':
            return Schema('nullable', inner=s)
        if name == 'nullish':
            return Schema('optional', inner=Schema('nullable', inner=s))
        if name == 'default':
            d = a[0]
            if isinstance(d, (Func, Builtin)):
                d = interp.call(d, [])
            return Schema('default', inner=s, fallback=d)
        if name == 'prefault':
            return Schema('prefault', inner=s, fallback=a[0])
        if name == 'catch':
            return Schema('catch', inner=s, fallback=a[0])
        if name == 'readonly':
            return Schema('readonly', inner=s)
        if name == 'array':
            return Schema('array', element=s)
        if name == 'or':
            return Schema('union', options=[s, a[0]])
        if name == 'and':
            return Schema('intersection', left=s, right=a[0])
        if name == 'transform':
            return Schema('pipe', in_=s, out=Schema('transform'))
        if name == 'pipe':
            return Schema('pipe', in_=s, out=a[0])
        if name in ('refine', 'superRefine', 'check', 'brand'):
            return s.copy()
        if name == 'unwrap':
            return s.inner if s.inner is not None else (s.resolve_lazy() if t == 'lazy' else s)
        if name == 'isOptional':
            return s.optout is not None or t == 'undefined'
        # string checks
        if t == 'string':
            if name in ('min', 'max', 'length'):
                lo = a[0] if name in ('min', 'length') else -math.inf
                hi = a[0] if name in ('max', 'length') else math.inf
                return s.copy(checks=s.checks + [{'kind': 'length', 'minimum': lo, 'maximum': hi}])
            if name == 'regex':
                return s.copy(checks=s.checks + [{'kind': 'format', 'format': 'regex', 'pattern': a[0]}])
            if name == 'url':
                return s.copy(checks=s.checks + [{'kind': 'url', 'format': 'url'}])
            if name in ('email', 'date', 'uuid'):
                return s.copy(checks=s.checks + [{'kind': 'format', 'format': name, 'pattern': None}])
            if name == 'datetime':
                return s.copy(checks=s.checks + [{'kind': 'format', 'format': 'datetime', 'pattern': None}])
            if name in ('startsWith', 'endsWith', 'includes', 'lowercase', 'trim', 'toLowerCase', 'nonempty'):
                if name == 'nonempty':
                    return s.copy(checks=s.checks + [{'kind': 'length', 'minimum': 1, 'maximum': math.inf}])
                return s.copy(checks=s.checks + [{'kind': 'rewrite' if name in ('trim', 'toLowerCase') else 'other'}])
        if t == 'number':
            def bound(kind, v, inc):
                return s.copy(checks=s.checks + [{'kind': kind, 'bound': v, 'inclusive': inc}])
            if name in ('min', 'gte'):
                return bound('above', a[0], True)
            if name == 'gt':
                return bound('above', a[0], False)
            if name in ('max', 'lte'):
                return bound('below', a[0], True)
            if name == 'lt':
                return bound('below', a[0], False)
            if name == 'positive':
                return bound('above', 0, False)
            if name == 'nonnegative':
                return bound('above', 0, True)
            if name == 'negative':
                return bound('below', 0, False)
            if name == 'int':
                return s.copy(checks=s.checks + [{'kind': 'integer', 'format': 'safeint', 'minimum': -9007199254740991, 'maximum': 9007199254740991}])
            if name == 'finite':
                return s
        if t == 'array':
            if name in ('min', 'max', 'length', 'nonempty'):
                lo = a[0] if name in ('min', 'length') else (1 if name == 'nonempty' else -math.inf)
                hi = a[0] if name in ('max', 'length') else math.inf
                return s.copy(checks=s.checks + [{'kind': 'length', 'minimum': lo, 'maximum': hi}])
        if t == 'enum':
            if name == 'exclude' and isinstance(a[0], list):
                ex = set(x for x in a[0] if isinstance(x, str))
                return Schema('enum', entries={k: v for k, v in s.entries.items() if k not in ex} if isinstance(s.entries, dict) else None,
                              options=[o for o in s.options if o not in ex])
            if name == 'extract' and isinstance(a[0], list):
                keep = set(x for x in a[0] if isinstance(x, str))
                return Schema('enum', entries=None, options=[o for o in s.options if o in keep])
        if t == 'object':
            shape = s.shape
            if name in ('extend', 'safeExtend'):
                if not isinstance(a[0], dict):
                    return Unknown('extend arg')
                return s.copy(shape={**shape, **a[0]}, metadata={}, checks=[])
            if name == 'merge':
                o = a[0]
                if not is_schema(o) or o.type != 'object':
                    return Unknown('merge arg')
                return s.copy(shape={**shape, **o.shape}, others=o.others, metadata={})
            if name in ('pick', 'omit', 'partial', 'required'):
                mask = a[0]
                if mask is Undefined:
                    chosen = list(shape)
                elif isinstance(mask, dict):
                    chosen = [k for k, v in mask.items() if v is True or (v not in (False, None, Undefined, 0, ''))]
                else:
                    return Unknown(f'{name} mask')
                if name == 'pick':
                    return s.copy(shape={k: shape[k] for k in chosen if k in shape}, metadata={}, checks=[])
                if name == 'omit':
                    return s.copy(shape={k: v for k, v in shape.items() if k not in chosen}, metadata={}, checks=[])
                if name == 'partial':
                    return s.copy(shape={k: (Schema('optional', inner=v) if k in chosen else v) for k, v in shape.items()}, metadata={})
                return s.copy(shape={k: (Schema('nonoptional', inner=v) if k in chosen else v) for k, v in shape.items()}, metadata={})
            if name == 'strict':
                return s.copy(others=Schema('never'), metadata={})
            if name in ('passthrough', 'loose'):
                return s.copy(others=Schema('unknown'), metadata={})
            if name == 'strip':
                return s.copy(others=None, metadata={})
            if name == 'catchall':
                return s.copy(others=a[0], metadata={})
            if name == 'keyof':
                return Schema('enum', entries={k: k for k in shape}, options=list(shape))
        self.warnings.append(f'unmodelled schema method {t}.{name}')
        return s


class ToolDef:
    def __init__(self, obj, env):
        self.obj = obj
        self.env = env

    def prop(self, interp, name):
        o = self.obj
        if o.getters and name in o.getters:
            return interp.call(o.getters[name], [], this=self)
        return o.get(name, Undefined)

    def __repr__(self):
        n = self.obj.get('name')
        return f'<tool {n}>'


def _to_jsobj(v):
    if isinstance(v, dict):
        o = JSObj()
        for k, x in v.items():
            o[k] = _to_jsobj(x)
        return o
    if isinstance(v, list):
        return [_to_jsobj(x) for x in v]
    return v


# ---- JSON Schema conversion (output mode)

def _length_bounds(s):
    lo, hi = -math.inf, math.inf
    for r in s.checks:
        if r.get('kind') == 'length':
            lo = max(lo, r.get('minimum', -math.inf))
            hi = min(hi, r.get('maximum', math.inf))
    return (lo if math.isfinite(lo) else None, hi if math.isfinite(hi) else None)


FORMAT_MAP = {'guid': 'uuid', 'url': 'uri', 'datetime': 'date-time', 'regex': None}


def _num(v):
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def is_optional_field(s):
    """The converter's test for leaving a property out of `required`."""
    t = s.type
    if t == 'pipe':
        return is_optional_field(s.out)
    if t == 'union':
        return any(is_optional_field(o) for o in s.options)
    if t == 'catch':
        return is_optional_field(s.inner)
    if t in ('nullable', 'readonly'):
        return is_optional_field(s.inner)
    if t == 'lazy':
        return is_optional_field(s.resolve_lazy())
    return t == 'undefined' or (t != 'transform' and s.optout is not None)


class Unrepresentable(Exception):
    pass


def to_json_schema(s, depth=0):
    if isinstance(s, Choice):
        raise Unrepresentable('choice in schema')
    if not is_schema(s):
        raise Unrepresentable(f'not a schema: {s!r}')
    if depth > 40:
        raise Unrepresentable('too deep')
    o = _node(s, depth)
    for k, v in s.metadata.items():
        o[k] = _plain(v)
    inner = None
    t = s.type
    if t == 'pipe':
        inner = s.out
    elif t in ('optional', 'default', 'catch', 'lazy', 'readonly', 'prefault', 'nonoptional'):
        inner = s.inner if t != 'lazy' else s.resolve_lazy()
    if inner is not None:
        l = to_json_schema(inner, depth + 1)
        for k, v in l.items():
            if k not in o:
                o[k] = v
    # metadata keys last, in the order the library gives
    if s.metadata:
        for k in list(o):
            if k not in s.metadata:
                v = o.pop(k)
                o[k] = v
        # the JS moves non-metadata keys to the end
    return o


def _plain(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if v is Undefined:
        return None
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if x is not Undefined}
    if isinstance(v, Unknown):
        raise Unrepresentable(f'unknown value {v.why}')
    raise Unrepresentable(f'value {v!r}')


def _node(s, depth):
    t = s.type
    if t == 'string':
        r = {'type': 'string'}
        lo, hi = _length_bounds(s)
        if lo is not None:
            r['minLength'] = _num(lo)
        if hi is not None:
            r['maxLength'] = _num(hi)
        pats = []
        fmt = None
        for c in s.checks:
            if c.get('kind') == 'format' and c.get('pattern') is not None:
                p = c['pattern']
                if p not in pats:
                    pats.append(p)
            if c.get('kind') == 'url' or (c.get('kind') == 'format' and c.get('part') is None):
                fmt = c.get('format')
        if fmt:
            f = FORMAT_MAP.get(fmt, fmt)
            if f is not None:
                r['format'] = f
        if any(c.get('format') == 'base64' for c in s.checks):
            r['contentEncoding'] = 'base64'
        srcs = [p.source if isinstance(p, RegExpVal) else str(p) for p in pats]
        if len(srcs) == 1:
            r['pattern'] = srcs[0]
        elif len(srcs) > 1:
            r['allOf'] = [{'pattern': x} for x in srcs]
        return r
    if t == 'number':
        typ = 'number'
        lo, xlo, hi, xhi = -math.inf, -math.inf, math.inf, math.inf
        for c in s.checks:
            k = c.get('kind')
            if k == 'integer':
                typ = 'integer'
                lo = max(lo, c.get('minimum', -math.inf))
                hi = min(hi, c.get('maximum', math.inf))
            elif k == 'above' and c.get('inclusive'):
                lo = max(lo, c['bound'])
            elif k == 'above':
                xlo = max(xlo, c['bound'])
            elif k == 'below' and c.get('inclusive'):
                hi = min(hi, c['bound'])
            elif k == 'below':
                xhi = min(xhi, c['bound'])
        r = {'type': typ}
        if xlo > -math.inf and xlo >= lo:
            r['exclusiveMinimum'] = _num(xlo)
        elif lo > -math.inf:
            r['minimum'] = _num(lo)
        if xhi < math.inf and xhi <= hi:
            r['exclusiveMaximum'] = _num(xhi)
        elif hi < math.inf:
            r['maximum'] = _num(hi)
        return r
    if t in ('boolean', 'null'):
        return {'type': t}
    if t in ('never', 'undefined'):
        return {'not': {}}
    if t == 'readonly':
        return {'readOnly': True}
    if t in ('transform', 'custom', 'unknown', 'any'):
        return {}
    if t == 'object':
        props = {}
        req = []
        for k, v in s.shape.items():
            if isinstance(v, Choice):
                raise Unrepresentable(f'choice at {k}')
            props[k] = to_json_schema(v, depth + 1)
            if not is_optional_field(v):
                req.append(k)
        r = {'type': 'object', 'properties': props}
        if req:
            r['required'] = req
        if s.others is None or s.others.type == 'never':
            r['additionalProperties'] = False
        else:
            r['additionalProperties'] = to_json_schema(s.others, depth + 1)
        return r
    if t == 'literal':
        vals = [v for v in s.values if v is not Undefined]
        if not vals:
            return {'not': {}} if not s.values else {}
        types = set('null' if v is None else {bool: 'boolean', str: 'string', int: 'number', float: 'number'}.get(type(v), 'object') for v in vals)
        r = {'type': next(iter(types))} if len(types) == 1 else {}
        if len(vals) == 1:
            r['const'] = vals[0]
        else:
            r['enum'] = vals
        return r
    if t == 'enum':
        if not s.options:
            return {'not': {}}
        return {'type': 'string', 'enum': list(s.options)}
    if t == 'array':
        lo, hi = _length_bounds(s)
        r = {}
        if lo is not None:
            r['minItems'] = _num(lo)
        if hi is not None:
            r['maxItems'] = _num(hi)
        r['type'] = 'array'
        r['items'] = to_json_schema(s.element, depth + 1)
        return r
    if t == 'union':
        return {'anyOf': [to_json_schema(o, depth + 1) for o in s.options]}
    if t == 'nullable':
        return {'anyOf': [to_json_schema(s.inner, depth + 1), {'type': 'null'}]}
    if t == 'intersection':
        return {'allOf': [to_json_schema(s.left, depth + 1), to_json_schema(s.right, depth + 1)]}
    if t == 'record':
        r = {'type': 'object', 'propertyNames': to_json_schema(s.key, depth + 1),
             'additionalProperties': to_json_schema(s.value, depth + 1)}
        keys = [o for o in (s.key.options or []) if isinstance(o, str)] if s.key.type == 'enum' else []
        if keys and not s.partial:
            r['required'] = keys
        return r
    if t == 'tuple':
        r = {'type': 'array', 'prefixItems': [to_json_schema(x, depth + 1) for x in s.items]}
        if s.rest is not None:
            r['items'] = to_json_schema(s.rest, depth + 1)
        return r
    if t == 'template_literal':
        return {'type': 'string'}
    if t == 'default':
        return {'default': _plain(s.fallback if not isinstance(s.fallback, Func) else Unknown('dynamic default'))}
    if t == 'catch':
        return {'default': _plain(s.fallback)} if not isinstance(s.fallback, (Func, Builtin)) else {}
    return {}


# ======================================================================
# extraction and output
# ======================================================================
DEFAULT_VERSION = '2.1.333'
PACKAGE = '@anthropic-ai/claude-code-linux-x64'
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.normpath(os.path.join(HERE, '..', 'tests', 'fixtures', 'claude-code-2.1-tools.json'))

BUN_TRAILER = b'\n---- Bun! ----\n'


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- download

def npm_pack(version, workdir):
    """Fetches the platform package with `npm pack` and unpacks its binary."""
    spec = f'{PACKAGE}@{version}'
    log(f'npm pack {spec} (into {workdir})')
    out = subprocess.run(['npm', 'pack', spec, '--silent'], cwd=workdir, check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()
    tgz = os.path.join(workdir, out[-1].strip())
    with tarfile.open(tgz) as tf:
        member = tf.getmember('package/claude')
        with tf.extractfile(member) as src, open(os.path.join(workdir, 'claude'), 'wb') as dst:
            shutil.copyfileobj(src, dst)
        pj = json.load(tf.extractfile(tf.getmember('package/package.json')))
    if pj.get('version') != version:
        raise SystemExit(f'package.json says {pj.get("version")}, wanted {version}')
    return os.path.join(workdir, 'claude')


# ---------------------------------------------------------------- Bun graph

def bun_modules(path):
    """Reads the module graph a `bun build --compile` binary carries: the
    blob ends with an Offsets struct and the trailer "\\n---- Bun! ----\\n".
    Returns {module path: bytes}."""
    with open(path, 'rb') as f:
        data = f.read()
    t = data.rfind(BUN_TRAILER)
    if t < 0:
        raise SystemExit('no Bun trailer: not a Bun-compiled binary?')
    off = t - 32  # byte_count u64, modules (u32 off, u32 len), entry u32, argv (u32, u32), flags u32
    byte_count, mod_off, mod_len = struct.unpack_from('<QII', data, off)
    base = off - byte_count
    table = data[base + mod_off: base + mod_off + mod_len]

    def sp(o, ln):
        return data[base + o: base + o + ln]

    for size in (52, 48, 56, 44, 60, 40, 64, 36, 32):
        if mod_len % size:
            continue
        mods = {}
        ok = True
        for i in range(mod_len // size):
            no, nl, co, cl = struct.unpack_from('<4I', table, i * size)
            name = sp(no, nl)
            if not (name.startswith(b'/$bunfs/') or name.startswith(b'B:/~BUN/')):
                ok = False
                break
            mods[name.decode('utf-8', 'replace')] = sp(co, cl)
        if ok and mods:
            return mods
    raise SystemExit('could not read the Bun module table')


def js_sources(mods):
    out = {}
    for name, body in mods.items():
        if not name.endswith(('.js', '.mjs', '.cjs')):
            continue
        try:
            out[name] = body.decode('utf-8')
        except UnicodeDecodeError:
            continue  # a binary or latin-1 asset, not bundle code
    return out


# ---------------------------------------------------------------- discovery

def module_version(files):
    for src in files.values():
        m = re.search(r'^// Version: (\S+)', src[:2000], re.M)
        if m:
            return m.group(1)
    return None


def decl_text(m, info):
    s = m.toks[info[1]].s
    e = m.toks[info[2] - 1].e if len(info) > 2 and info[2] <= len(m.toks) else s + 2000
    return m.src[s:e]


def find_tool_defs(bundle, interp, hooks):
    """Every tool definition in the bundle: the object literals that define a
    tool (they carry a registryToolId, or an inputSchema getter) and what
    the bundle builds from them."""
    found = []
    for name, src in bundle.files.items():
        if 'registryToolId' not in src and 'get inputSchema()' not in src:
            continue
        m = bundle.module(name)
        m.scan()
        for d, info in list(m.decls.items()):
            if info[0] != 'init':
                continue
            t = decl_text(m, info)
            if 'registryToolId' not in t and 'get inputSchema()' not in t:
                continue
            interp.calls = 0
            v = hooks.wrap_tool(m.lookup(d, interp))
            if isinstance(v, ToolDef):
                found.append((m, d, v))
    return found


def find_decl_by_regex(bundle, pattern, text_hint):
    rx = re.compile(pattern)
    for name, src in bundle.files.items():
        if text_hint not in src:
            continue
        mm = rx.search(src)
        if mm:
            return bundle.module(name), mm.group(1)
    return None, None


def legacy_names(bundle, interp):
    """The map of older tool names to current ones (Task -> Agent, ...)."""
    m, name = find_decl_by_regex(bundle, r'([\w$]+)=\{Task:"Agent"', 'Task:"Agent"')
    if m is None:
        return {}
    v = m.lookup(name, interp)
    if isinstance(v, dict):
        return {k: x for k, x in v.items() if isinstance(x, str)}
    return {}


def api_schema_fn(bundle, interp):
    """The function that turns a tool into the input schema sent to the
    API (inputJSONSchema or the converted zod schema, less fields that the
    session's features leave out)."""
    m, name = find_decl_by_regex(
        bundle, r'function ([\w$]+)\([\w$]+,\{remoteToolForwarding:[\w$]+\}\)\{let [\w$]+="inputJSONSchema"in',
        'remoteToolForwarding')
    if m is None:
        return None
    return m.lookup(name, interp)


def base_tool_list(bundle, interp):
    """getAllBaseTools() of the tool registry object."""
    m, name = find_decl_by_regex(bundle, r'([\w$]+)=\{getAllBaseTools:[\w$]+,getTools:', 'getAllBaseTools:')
    if m is None:
        return None
    reg = m.lookup(name, interp)
    f = reg.get('getAllBaseTools') if isinstance(reg, dict) else None
    if f is None:
        return None
    interp.calls = 0
    interp.budget = 400000
    r = interp.call(f, [])
    interp.budget = 60000
    return r if isinstance(r, list) else None


# ---------------------------------------------------------------- output

SIMPLE_KEYS = ('const', 'default', 'format', 'pattern', 'minLength', 'maxLength', 'minimum', 'maximum',
               'exclusiveMinimum', 'exclusiveMaximum', 'minItems', 'maxItems')


def simplify(js, required):
    """One property of a JSON Schema, in the fixture's shape."""
    out = {}
    if 'anyOf' in js:
        subs = [simplify(x, True) for x in js['anyOf']]
        types = []
        for s in subs:
            t = s.get('type')
            if isinstance(t, list):
                types.extend(t)
            elif t is not None:
                types.append(t)
        if all(set(s) <= {'type', 'required'} for s in subs) and types:
            out['type'] = types
        else:
            out['anyOf'] = [{k: v for k, v in s.items() if k != 'required'} for s in subs]
    elif 'type' in js:
        out['type'] = js['type']
    if 'enum' in js:
        out['enum'] = js['enum']
    for k in SIMPLE_KEYS:
        if k in js:
            out[k] = js[k]
    if js.get('type') == 'array' and 'items' in js:
        out['items'] = simplify_items(js['items'])
    if js.get('type') == 'object' and 'properties' in js:
        # each nested property carries its own required flag
        nested = simplify_object(js)
        nested.pop('required')
        out.update(nested)
    elif js.get('type') == 'object' and 'additionalProperties' in js and js['additionalProperties'] not in (False,):
        ap = js['additionalProperties']
        out['additionalProperties'] = simplify_items(ap) if isinstance(ap, dict) and ap else True
    out['required'] = required
    if 'description' in js:
        out['description'] = js['description']
    return out


def simplify_items(js):
    s = simplify(js, True)
    s.pop('required', None)
    if js.get('type') == 'object' and 'properties' in js:
        s['required'] = list(js.get('required', []))  # as at the top level
    return s


def simplify_object(js):
    req = js.get('required', [])
    props = {k: simplify(v, k in req) for k, v in js.get('properties', {}).items()}
    out = {'properties': props, 'required': list(req)}
    ap = js.get('additionalProperties', None)
    if ap is False:
        out['additionalProperties'] = False
    elif ap is not None:
        out['additionalProperties'] = True
    return out


def tool_entry(interp, hooks, td, api_fn, legacy):
    name = td.prop(interp, 'name')
    entry = {}
    aliases = td.prop(interp, 'aliases')
    entry['aliases'] = [a for a in aliases if isinstance(a, str)] if isinstance(aliases, list) else []
    entry['legacy_names'] = sorted(k for k, v in legacy.items() if v == name and k not in entry['aliases'])
    hint = td.prop(interp, 'searchHint')
    if isinstance(hint, str):
        entry['search_hint'] = hint
    interp.calls = 0
    schema = None
    how = None
    if api_fn is not None:
        r = interp.call(api_fn, [td, JSObj(remoteToolForwarding=False)])
        if isinstance(r, dict):
            try:
                schema = to_py(r)
                how = 'api'
            except ValueError:
                schema = None
    if schema is None:
        interp.calls = 0
        j = td.prop(interp, 'inputJSONSchema')
        if isinstance(j, dict) and j:
            schema, how = to_py(j), 'inputJSONSchema'
        else:
            s = td.prop(interp, 'inputSchema')
            if isinstance(s, (Func, Builtin)):
                s = interp.call(s, [])
            schema, how = to_json_schema(s), 'zod'
    schema.pop('$schema', None)
    entry.update(simplify_object(schema))
    entry['input_schema'] = schema
    return entry, how


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('version', nargs='?', default=DEFAULT_VERSION, help=f'package version (default {DEFAULT_VERSION})')
    ap.add_argument('--out', default=DEFAULT_OUT, help='where to write the JSON (default: %(default)s)')
    ap.add_argument('--binary', help='use this claude binary instead of downloading one')
    ap.add_argument('--workdir', help='download into this folder and keep it (default: a temporary folder)')
    ap.add_argument('--dump-js', help='also write the bundle\'s JavaScript modules into this folder')
    args = ap.parse_args()

    tmp = None
    if args.binary:
        binary = args.binary
    else:
        workdir = args.workdir or (tmp := tempfile.mkdtemp(prefix='cc-tools-'))
        os.makedirs(workdir, exist_ok=True)
        binary = npm_pack(args.version, workdir)
    try:
        t0 = time.time()
        mods = bun_modules(binary)
        files = js_sources(mods)
        log(f'{len(mods)} modules in the binary, {len(files)} of them JavaScript')
        if args.dump_js:
            os.makedirs(args.dump_js, exist_ok=True)
            for n, src in files.items():
                with open(os.path.join(args.dump_js, n.rsplit('/', 1)[-1]), 'w', encoding='utf-8') as f:
                    f.write(src)
        version = module_version(files)
        if version != args.version and not args.binary:
            log(f'warning: the bundle says version {version}')
        bundle = Bundle(files)
        LENIENT['on'] = True
        hooks = ZodHooks(bundle)
        interp = Interp(bundle, hooks)
        legacy = legacy_names(bundle, interp)
        api_fn = api_schema_fn(bundle, interp)
        if api_fn is None:
            log('warning: the API schema builder was not found; using the raw schemas')
        defs = find_tool_defs(bundle, interp, hooks)
        base = base_tool_list(bundle, interp) or []
        base_ids = {id(x) for x in base if isinstance(x, ToolDef)}
        tools = {}
        hows = {}
        # a definition with an inputSchema getter wins over a bare head object
        defs.sort(key=lambda x: 0 if (x[2].obj.getters and 'inputSchema' in x[2].obj.getters) else 1)
        seen = set()
        for m, d, td in defs:
            if id(td) in seen:
                continue
            seen.add(id(td))
            name = td.prop(interp, 'name')
            if not isinstance(name, str) or name in tools:
                continue
            try:
                entry, how = tool_entry(interp, hooks, td, api_fn, legacy)
            except (Unrepresentable, ValueError, RecursionError) as e:
                log(f'  {name}: schema not readable ({e})')
                continue
            entry['in_base_list'] = id(td) in base_ids
            interp.calls = 0
            en = td.prop(interp, 'isEnabled')
            if isinstance(en, (Func, Builtin)):
                r = interp.call(en, [], this=td)
                entry['is_enabled'] = r if isinstance(r, bool) else None
            else:
                entry['is_enabled'] = True
            tools[name] = entry
            hows[name] = how
        order = sorted(tools)
        result = {
            '_about': ABOUT,
            'version': version,
            'source': f'{PACKAGE}@{version}',
            'assumptions': ASSUMPTIONS,
            'legacy_names': legacy,
            'tools': {n: tools[n] for n in order},
        }
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, 'w', encoding='utf-8') as f:
            json.dump(result, f, indent=1, ensure_ascii=False)
            f.write('\n')
        log(f'{len(tools)} tools written to {args.out} in {time.time() - t0:.0f}s')
        if hooks.warnings:
            log('notes:', sorted(set(hooks.warnings)))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


ABOUT = ("Claude Code's built-in tools as its bundle defines them, read out of the binary by "
         "scripts/extract-claude-code-tools.py. tools.<Name>: aliases (other names the tool answers to), "
         "legacy_names (old names the bundle maps to it that are not aliases), search_hint, properties, "
         "required (the required property names), additionalProperties, input_schema (the exact JSON Schema "
         "sent to the API), in_base_list and is_enabled (whether getAllBaseTools() lists it, and what its "
         "isEnabled() gives, under the assumptions below; null when undecidable). An entry of a properties map "
         "has type (a JSON Schema type, or a list of them for a union of simple types; anyOf for other unions), "
         "enum, const, default and bounds where the schema has them, items for arrays (the same shape without "
         "the required flag; object items have properties and a required list, like a tool), properties for "
         "objects (each with its own flag), required (true or false) and description.")

ASSUMPTIONS = [
    'Runtime state the script cannot see is read as unset: environment variables undefined, no settings, '
    'no cached feature flags (a flag read gives its coded default).',
    'The session is an interactive terminal session on a local machine (isInteractive() is true).',
    'Schemas are the ones sent to the API for a first-party model without agent teams or remote tool forwarding.',
]

def run():
    # the evaluator recurses deeply: give it a big stack in a thread of its own
    import threading
    sys.setrecursionlimit(40000)
    threading.stack_size(512 * 1024 * 1024)
    failure = []

    def target():
        try:
            main()
        except SystemExit as e:
            failure.append(e)
        except BaseException as e:  # report it from the main thread
            failure.append(e)

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if failure:
        raise failure[0]


if __name__ == '__main__':
    run()
