"""mos_port_data.py: the corpus, its batches and evaluation for tools/mos_port.py, as AWD-LSTM /
MoS's data.py, utils.py and main.py's evaluate."""

import os
import sys

import torch


def corpus_files(d):
    for pat in ("ptb.{}.txt", "{}.txt", "wiki.{}.tokens"):
        files = [os.path.join(d, pat.format(s)) for s in ("train", "valid", "test")]
        if all(os.path.exists(f) for f in files):
            return files
    sys.exit(f"no ptb.train.txt / train.txt / wiki.train.tokens (and valid, test) in {d}")


def read_corpus(d):
    word2idx, idx2word, splits = {}, [], []
    for path in corpus_files(d):
        ids = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                for w in line.split() + ["<eos>"]:
                    if w not in word2idx:
                        word2idx[w] = len(idx2word)
                        idx2word.append(w)
                    ids.append(word2idx[w])
        splits.append(torch.tensor(ids, dtype=torch.long))
    return idx2word, splits


def batchify(data, bsz):
    """[n] -> [n//bsz, bsz]: column b is the b-th contiguous stretch of the text."""
    nbatch = data.size(0) // bsz
    return data[: nbatch * bsz].view(bsz, -1).t().contiguous()


def get_batch(source, i, seq_len):
    seq_len = min(seq_len, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len]


def detach(hidden):
    return [(h.detach(), c.detach()) for h, c in hidden]


def evaluate(model, source, bptt, bsz):
    """Mean NLL per target, hidden state carried across segments, every target counted once."""
    model.eval()
    hidden = model.init_hidden(bsz)
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, bptt):
            x, y = get_batch(source, i, bptt)
            _, nll, _, _, hidden = model(x, hidden, y)
            total += nll.sum().item()
            count += nll.numel()
    return total / count
