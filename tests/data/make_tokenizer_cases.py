#!/usr/bin/python3
"""Writes tests/data/tokenizer_cases.h: tricky strings with the tokens Python gives for them,
the oracle for tests/test_data_tokenizer.c.

    /usr/bin/python3 tests/data/make_tokenizer_cases.py > tests/data/tokenizer_cases.h

The oracles are the definitions the C tokenizers follow, written out here without torchtext or
sacrebleu (neither is installed):
  * basic_english: torchtext.data.utils._basic_english_normalize (its 12 patterns, in order,
    after str.lower(), then str.split()), as in shared/bench/imdb_classifier_torch.py;
  * words: re.findall(r"\\w+|[^\\w\\s]", line.strip().lower()) (shared/bench/multi30k_...py);
  * chars: every code point that is not str.isspace(), case kept;
  * 13a: sacrebleu's Tokenizer13a (as re-implemented in multi30k_transformer_torch.py);
  * detokenize: the detokenize() of multi30k_transformer_torch.py.
Also the CRC-32 (zlib) of str.lower(), str.upper(), \w and \s over every code point (surrogates
left out), for exhaustive checks of the generated Unicode tables.
Token lists are joined with U+001F, which str.isspace() counts as space, so no token holds it.
"""
import re
import sys
import zlib

PATTERNS = [r"\'", r"\"", r"\.", r"<br \/>", r",", r"\(", r"\)", r"\!", r"\?", r"\;", r"\:", r"\s+"]
REPLACEMENTS = [" '  ", "", " . ", " ", " , ", " ( ", " ) ", " ! ", " ? ", " ", " ", " "]
COMPILED = [(re.compile(p), r) for p, r in zip(PATTERNS, REPLACEMENTS)]


def basic_english(line):
    line = line.lower()
    for pat, rep in COMPILED:
        line = pat.sub(rep, line)
    return line.split()


WORDS = re.compile(r"\w+|[^\w\s]")


def words(line):
    return WORDS.findall(line.strip().lower())


def chars(line):
    return [c for c in line if not c.isspace()]


_13A = [
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),
]


def tok13a(line):
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = (line.replace("&quot;", '"').replace("&amp;", "&")
                .replace("&lt;", "<").replace("&gt;", ">"))
    line = f" {line} "
    for r, rep in _13A:
        line = r.sub(rep, line)
    return line.split()


def detokenize(tokens):
    s = " ".join(tokens)
    s = re.sub(r" ([.,!?;:)\]}%])", r"\1", s)
    s = re.sub(r"([(\[{]) ", r"\1", s)
    s = re.sub(r" ?' ?", "'", s)
    s = re.sub(r" ?- ?", "-", s)
    s = re.sub(r'" (.*?) "', r'"\1"', s)
    if s:
        s = s[0].upper() + s[1:]
    return s


TEXTS = [
    "You can now install TorchText using pip!",
    "",
    "   \t\n ",
    "This movie was great.<br /><br />I loved it!",
    "Bad.<BR />Worse.<Br/>Worst<br >end<br />",
    "<br \"/>quote-joined br, <b\"r />, <br /\"> and <br /><br />.",
    "Don't you think it's \"great\"? I didn't!",
    "1.5 million, (approx.) 3,000 people... 10/10 - 2:30; 50% off!",
    "wait...what?!?! (really) [sic] {braces} <html>tags</html>",
    "a;b:c,d.e(f)g!h?i'j\"k",
    "tabs\tand\nnewlines\r\nand\x0bvertical\x0cfeed\x1cfile\x1dgroup\x1erecord\x1funit",
    "no\u00a0break\u2003em\u3000ideographic\u2028line\u202fnarrow\u0085nel\u200bzero-width",
    "\u00dcn\u00efc\u00f6d\u00e9 CAF\u00c9 \u00c0 LA CR\u00c8ME BR\u00dbL\u00c9E \u00c7A \u00c6SIR \u0152UVRE",
    "\u0100\u0102\u0104\u0106\u0130stanbul \u0178 \u01c4 \u01c5 \u01c6 \u01f1 \u0187\u0191\u01f7 \u023a\u023e \u1e9e",
    "\u03a3\u0391\u03a3 \u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3. \u03a3 \u0391\u03a3' \u0391\u03a3\u0301 \u0391\u03a3\u0391",
    "\u041f\u0420\u0418\u0412\u0415\u0422 \u041c\u0418\u0420 \u0401\u0416 \u0531\u0532 \u10a0\u10a1 \u13a0\u13a1 \uff21\uff22\uff23",
    "Kelvin \u212a and \u212b ngstr\u00f6m, \u2160\u216b \u24b6\u24b7 \U00010400\U00010401 \U0001e900",
    "\u6211\u7231\u8fd9\u90e8\u7535\u5f71\u3002\u5f88\u597d\u770b\uff01\u4e00\u4e8c\u4e09 \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
    "\U0001f600 great \U0001f44d\U0001f3fd!! \u2764\ufe0f",
    "e-mail @home #1 $5 & 50% ~tilde ^caret `tick` |pipe| \\back/slash/ +plus= *star*",
    "L'homme porte un t-shirt \u00e0 l'\u00e9cole, n'est-ce pas ? \u00ab Oui \u00bb !",
    "Deux chiens jouent dans l\u2019herbe verte.",
    "Ca va? Tr\u00e8s bien! \u00c7a co\u00fbte 3,50 \u20ac... na\u00efve No\u00ebl",
    "x_y snake_case __init__ 3.14 2.5e10 l'\u00e9t\u00e9 1-2 a--b",
    "e\u0301 combining acute, \u0915\u093f\u0924\u093e\u092c \u0645\u0631\u062d\u0628\u0627 \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",
    "Hello,World.Foo!Bar?(x)[y]{z}",
    "A man in an orange hat starring at something.",
    "Un homme avec un chapeau orange regardant quelque chose.",
    "Cinq personnes avec des vestes d'hiver et des casques sont debout dans la neige, avec des motoneiges en arri\u00e8re-plan.",
    "&quot;Quoted&quot; &amp; &lt;tag&gt; &amp;lt; <skipped>gone multi-\nline\nbreak",
    "1,000.50 and .5 and 5. and ,x x, 3-4 -5 a-1 1-a",
    "''' \"\"\" ... ,,, ((( ))) !!! ??? ;;; :::",
    "\u00ff\u0178 \u00df \u0149 \ufb01 \u1f80 \u1f88 \u0390",
]

# Token lists for the detokenizer: the word tokens of sentences, plus hand-made edge cases.
DETOK = [words(t) for t in TEXTS[20:23] + TEXTS[27:29]] + [
    [],
    ["un", "homme", "(", "en", "t", "-", "shirt", ")", "regarde", "[", "x", "]", "."],
    ["\"", "bonjour", "\"", "dit", "-", "il", ",", "\"", "au", "revoir", "\"", "."],
    ["\u00e9t\u00e9", "d", "'", "une", "l", "'", "herbe", "'", "'", "x"],
    ["\u00df", "est", "5", "%", ";", "ok", ":", "{", "a", "}", "!", "?"],
    ["\"", "\"", "a", "\"", "b", "\"", "\""],
    ["-", "-", "a", "-", "'", "b"],
    ["\u0149", "x"],
]


def c_string(s):
    return '"' + "".join("\\%03o" % b for b in s.encode("utf-8")) + '"'


def joined(tokens):
    assert all(tok and "\x1f" not in tok for tok in tokens)
    return c_string("\x1f".join(tokens))


def exhaustive_crcs():
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    lower = b"".join(chr(c).lower().encode("utf-8") for c in cps)
    upper = b"".join(chr(c).upper().encode("utf-8") for c in cps)
    word = bytes(1 if re.match(r"\w", chr(c)) else 0 for c in cps)
    space = bytes(1 if re.match(r"\s", chr(c)) else 0 for c in cps)
    return {"LOWER": zlib.crc32(lower), "UPPER": zlib.crc32(upper), "WORD": zlib.crc32(word),
            "SPACE": zlib.crc32(space)}


def main():
    out = sys.stdout
    out.write("/* Generated by tests/data/make_tokenizer_cases.py with Python %s. Do not edit.\n"
              " * Token lists are joined with \\037 (U+001F). */\n" % sys.version.split()[0])
    for name, crc in exhaustive_crcs().items():
        out.write("#define CRC_ALL_%s 0x%08Xu\n" % (name, crc))
    out.write("\n")
    out.write("typedef struct tok_case {\n    const char *text, *lower, *basic_english, *words, "
              "*chars, *t13a;\n} tok_case;\n\n")
    out.write("static const tok_case tok_cases[] = {\n")
    for t in TEXTS:
        fields = [c_string(t), c_string(t.lower()), joined(basic_english(t)), joined(words(t)),
                  joined(chars(t)), joined(tok13a(t))]
        out.write("    {" + ",\n     ".join(fields) + "},\n")
    out.write("};\n\n")
    out.write("typedef struct detok_case {\n    const char *tokens, *text;\n} detok_case;\n\n")
    out.write("static const detok_case detok_cases[] = {\n")
    for toks in DETOK:
        out.write("    {" + joined(toks) + ",\n     " + c_string(detokenize(toks)) + "},\n")
    out.write("};\n")


if __name__ == "__main__":
    main()
