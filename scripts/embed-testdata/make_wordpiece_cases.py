"""Regenerate wordpiece_cases.jsonl: token ids from Hugging Face `tokenizers` (the reference).

    pip install tokenizers
    python3 scripts/embed-testdata/make_wordpiece_cases.py \
        DIR/tokenizer.json path/to/agents-real.jsonl

DIR/tokenizer.json is potion-base-8M's own (the built-in table's model; see
scripts/embed-testdata/make_static_reference.py).

Each output line is `[text, [ids without [CLS]/[SEP]]]`; the Rust tests compare the hand-written
tokeniser against it.
"""
import json
import sys

from tokenizers import Tokenizer

HANDWRITTEN = [
    "", " ", "\t\n\r", "Hello, World!", "current price of bitcoin", "crypto market quotes",
    "weather forecast for Paris", "Café crème brûlée à la française", "naïve résumé coöperate",
    "ÀÉÎÕÜ Ñandú ÇA", "İstanbul ıI", "Straße groß", "ﬁnance ﬂow (ligatures)", "Ωμέγα ΣΊΣΥΦΟΣ",
    "Привет, мир! Москва", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก",
    "東京の天気予報", "北京天气预报，明天下雨吗？", "한국어 형태소 분석기", "ひらがな カタカナ ｶﾀｶﾅ",
    "全角ＡＢＣ１２３！", "emoji 🚀🔥 rocket", "family 👨‍👩‍👧‍👦 zwj", "flags 🇫🇷🇺🇸", "🥰 new emoji 🫠",
    "https://example.com/path?q=1&x=y#frag", "user@example.org", "C++ & C# > Java?",
    "snake_case and kebab-case and CamelCase", "v1.2.3-beta+build.7", "$100.00 €50 £20 ¥1000",
    "50% off!!! ...wait???", "“smart quotes” ‘single’ «guillemets» — em–dash", "a/b\\c|d~e`f^g",
    "tab\there\nnewline\r\nwindows", "zero\u200bwidth\u200cjoin\u200dchars", "soft\u00adhyphen",
    "nbsp\u00a0here\u2003em-space\u3000ideographic", "control\u0001\u0007\u001fchars\u007f",
    "null\u0000byte", "replacement\ufffdchar", "bom\ufeffstart", "combining e\u0301 a\u0300 n\u0303",
    "[CLS] special [SEP] tokens [MASK] in [UNK] text [PAD]", "a[CLS]b [cls] [ SEP ]",
    "x" * 100, "y" * 101, "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "1234567890 3.14159 1e-9 0x1F", "ℝ ∑ ∫ √2 ≈ 1.414 ∞", "™ © ® ° ± § ¶ • …", "¿Qué tal? ¡Hola!",
    "Ｈｅｌｌｏ", "ⅷ ⑤ ²³", "𝐁𝐨𝐥𝐝 𝔉𝔯𝔞𝔨𝔱𝔲𝔯", "\U0002A700 rare cjk ext", "㐀 cjk ext A 豈 compat",
    "Ǆ ǅ ǆ titlecase", "ΑΒΓ αβγ ς", "Tiếng Việt có dấu", "Dansk ÆØÅ æøå", "Ελληνικά ά έ ή",
    "MCP server for PostgreSQL & MySQL databases", "GitHub PR reviewer (A2A agent)",
    "   leading and trailing   ", "multiple     spaces", "punct!!!???,,,;;;", "'quoted' \"double\"",
    "<html><body>tags</body></html>", "{\"json\": [1, 2, 3]}", "path/to/file.rs:42:7",
]


def corpus_samples(path, every=97, limit=260):
    out = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            if number % every:
                continue
            agent = json.loads(line)
            text = f"{agent['name']}: {agent['description']}"[:240]
            out.append(text)
            if len(out) >= limit:
                break
    return out


def cjk_samples(path, limit=30):
    out = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            agent = json.loads(line)
            if any("\u4e00" <= c <= "\u9fff" or "\u3040" <= c <= "\u30ff" for c in agent["description"]):
                out.append(agent["description"][:200])
                if len(out) >= limit:
                    break
    return out


def main():
    tokenizer = Tokenizer.from_file(sys.argv[1])
    tokenizer.no_padding()
    tokenizer.no_truncation()
    texts = HANDWRITTEN + corpus_samples(sys.argv[2]) + cjk_samples(sys.argv[2])
    for text in texts:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        print(json.dumps([text, ids], ensure_ascii=False))


if __name__ == "__main__":
    main()
