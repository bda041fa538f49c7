#!/usr/bin/python3
"""Independent reference for the SentencePiece-BPE tokenizer (llama2.c semantics).

Vocabulary sources:
  * llama2.c tokenizer.bin: int32 max_token_length, then per token float32 score,
    int32 len, bytes. Pieces use ' ' for SentencePiece's U+2581. Ids 0,1,2 are
    unk, bos, eos; "<0xXX>" pieces are byte tokens.
  * GGUF: tokenizer.ggml.tokens / scores / token_type (pieces use U+2581, mapped to ' ').

encode(text_bytes, bos=True):
  if text is non-empty, prepend ' ' (dummy prefix); split into UTF-8 characters
  (a byte that does not start a complete, well-formed sequence is its own 1-byte
  unit); a unit that is a NORMAL piece becomes that token, otherwise each of its
  bytes becomes the byte token <0xXX>; then repeatedly merge the adjacent pair whose
  concatenated piece string is a NORMAL piece with the highest score (ties: leftmost)
  until no pair merges. Byte tokens' piece strings are "<0xXX>", so they never merge.
decode(ids): concatenate pieces; byte tokens give raw bytes, control/unknown tokens
  give nothing; the first piece's leading ' ' is dropped when it directly follows BOS.

CLI:
  spm_ref.py --vocab PATH encode TEXT          (prints ids, BOS first, space-separated)
  spm_ref.py --vocab PATH encode --file FILE   (raw bytes of FILE as the text)
  spm_ref.py --vocab PATH decode ID [ID ...]   (writes the decoded bytes to stdout)
  options: --no-bos (encode without BOS)
"""
import argparse
import os
import re
import struct
import sys

# llama.cpp token types (as stored in GGUF tokenizer.ggml.token_type)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
SPM_SPACE = "\u2581".encode("utf-8")
_BYTE_PIECE = re.compile(rb"<0x([0-9A-Fa-f]{2})>")


class Vocab:
    """Pieces (bytes, ' ' for spaces), scores, token types and lookup tables."""

    def __init__(self, pieces, scores, types):
        self.pieces, self.scores, self.types = pieces, scores, types
        # Only NORMAL pieces take part in encoding (later duplicates would win, as in llama.cpp;
        # the shipped vocabularies have none).
        self.normal = {p: i for i, p in enumerate(pieces) if types[i] == NORMAL}
        # byte value -> byte token id, found by piece text "<0xXX>"
        self.byte_id = {}
        for i, p in enumerate(pieces):
            m = _BYTE_PIECE.fullmatch(p)
            if m and types[i] == BYTE:
                self.byte_id[int(m.group(1), 16)] = i

    def __len__(self):
        return len(self.pieces)


def _llama2c_type(i, piece):
    """Token type for a llama2.c vocabulary entry (same rule as llama.cpp's converter)."""
    if i == UNK_ID:
        return UNKNOWN
    if i in (BOS_ID, EOS_ID) or not piece:
        return CONTROL
    if _BYTE_PIECE.fullmatch(piece):
        return BYTE
    return NORMAL


def load_llama2c_vocab(path):
    """Read a llama2.c tokenizer.bin (vocab size = number of entries in the file)."""
    with open(path, "rb") as f:
        data = f.read()
    off = 4  # skip max_token_length
    pieces, scores = [], []
    while off < len(data):
        if off + 8 > len(data):
            raise ValueError("%s: truncated entry" % path)
        score, n = struct.unpack_from("<fi", data, off)
        off += 8
        if n < 0 or off + n > len(data):
            raise ValueError("%s: bad piece length" % path)
        pieces.append(data[off:off + n])
        scores.append(score)
        off += n
    types = [_llama2c_type(i, p) for i, p in enumerate(pieces)]
    return Vocab(pieces, scores, types)


def load_gguf_vocab(path):
    """Read tokenizer.ggml.* arrays from a GGUF file, mapping U+2581 back to ' '."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.dont_write_bytecode = True
    from llama_ref import read_gguf
    meta, _ = read_gguf(path)
    toks = meta["tokenizer.ggml.tokens"]
    pieces = [t.encode("utf-8", errors="surrogateescape").replace(SPM_SPACE, b" ") for t in toks]
    scores = meta.get("tokenizer.ggml.scores", [0.0] * len(pieces))
    types = meta.get("tokenizer.ggml.token_type", [NORMAL] * len(pieces))
    return Vocab(pieces, list(scores), list(types))


def load_vocab(path):
    """Pick the vocabulary loader from the file's magic bytes."""
    with open(path, "rb") as f:
        magic = f.read(4)
    return load_gguf_vocab(path) if magic == b"GGUF" else load_llama2c_vocab(path)


def utf8_units(data):
    """Split bytes into UTF-8 characters; any byte not starting a complete sequence stands alone.

    Lead byte 0xxxxxxx -> 1 byte, 110xxxxx -> 2, 1110xxxx -> 3, 11110xxx -> 4, and the
    following bytes must all be continuation bytes 10xxxxxx. (Overlong forms are not
    rejected: they are never vocabulary pieces, so they fall back to bytes either way.)
    """
    units, i, n = [], 0, len(data)
    while i < n:
        b = data[i]
        if b < 0x80:
            length = 1
        elif 0xC0 <= b < 0xE0:
            length = 2
        elif 0xE0 <= b < 0xF0:
            length = 3
        elif 0xF0 <= b < 0xF8:
            length = 4
        else:
            length = 1  # stray continuation byte or 0xF8..0xFF
        if length > 1 and (i + length > n or any((c & 0xC0) != 0x80 for c in data[i + 1:i + length])):
            length = 1
        units.append(data[i:i + length])
        i += length
    return units


def encode(vocab, text, bos=True):
    """Encode bytes to token ids (see module docstring for the exact rule)."""
    if isinstance(text, str):
        text = text.encode("utf-8")
    ids = [BOS_ID] if bos else []
    if not text:
        return ids
    toks = []
    for u in utf8_units(b" " + text):
        if u in vocab.normal:
            toks.append(vocab.normal[u])
        else:
            toks.extend(vocab.byte_id.get(b, UNK_ID) for b in u)
    # Greedy BPE: merge the best-scoring adjacent pair until nothing merges.
    while True:
        best, best_i = None, -1
        for i in range(len(toks) - 1):
            merged = vocab.normal.get(vocab.pieces[toks[i]] + vocab.pieces[toks[i + 1]])
            if merged is not None and (best is None or vocab.scores[merged] > vocab.scores[best]):
                best, best_i = merged, i
        if best is None:
            break
        toks[best_i:best_i + 2] = [best]
    return ids + toks


def decode(vocab, ids):
    """Token ids -> bytes (byte tokens give raw bytes, control/unknown give nothing)."""
    out, prev = [], None
    for t in ids:
        ty = vocab.types[t]
        if ty == BYTE:
            piece = bytes([int(_BYTE_PIECE.fullmatch(vocab.pieces[t]).group(1), 16)])
        elif ty in (CONTROL, UNKNOWN, UNUSED):
            piece = b""
        else:
            piece = vocab.pieces[t]
            if prev == BOS_ID and piece.startswith(b" "):
                piece = piece[1:]
        out.append(piece)
        prev = t
    return b"".join(out)


def main(argv=None):
    """CLI: encode TEXT / --file FILE, or decode IDS."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", required=True, help="llama2.c tokenizer.bin or .gguf")
    ap.add_argument("--no-bos", action="store_true", help="encode without the BOS token")
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("encode")
    e.add_argument("text", nargs="?", default=None)
    e.add_argument("--file", default=None, help="read the text's raw bytes from this file")
    d = sub.add_parser("decode")
    d.add_argument("ids", nargs="+", type=int)
    a = ap.parse_args(argv)
    vocab = load_vocab(a.vocab)
    if a.cmd == "encode":
        if a.file is not None:
            with open(a.file, "rb") as f:
                text = f.read()
        elif a.text is not None:
            text = os.fsencode(a.text)  # the exact argv bytes, even if not valid UTF-8
        else:
            ap.error("encode needs TEXT or --file")
        print(" ".join(str(i) for i in encode(vocab, text, bos=not a.no_bos)))
    else:
        sys.stdout.buffer.write(decode(vocab, a.ids))
        sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
