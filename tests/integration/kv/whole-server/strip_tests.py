# Drops the test blocks of a Redis suite .tcl file that mention any of the given words
# (to measure a file past commands the server under test does not have yet).
import sys, re

path, words = sys.argv[1], sys.argv[2].split(',')
s = open(path).read()
out, i = [], 0
pat = re.compile(r'^(\s*)test [{"]', re.M)
while True:
    m = pat.search(s, i)
    if not m:
        out.append(s[i:]); break
    j = m.end() - 1  # at '{' of name
    # skip name braces then body braces
    def skip(k):
        depth = 0
        while True:
            c = s[k]
            if c == '\\': k += 2; continue
            if c == '{': depth += 1
            elif c == '}':
                depth -= 1
                if depth == 0: return k + 1
            k += 1
    if s[j] == '"':
        k = s.index('"', j + 1) + 1
    else:
        k = skip(j)
    while s[k] in ' \t': k += 1
    end = skip(k) if s[k] == '{' else k
    while True:
        k2 = end
        while s[k2] in ' \t': k2 += 1
        if s[k2] == '{': end = skip(k2)
        else: break
    block = s[m.start():end]
    out.append(s[i:m.start()])
    if not any(w in block for w in words):
        out.append(block)
    i = end
open(path, 'w').write(''.join(out))
