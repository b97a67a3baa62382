"""Baseline: a bag-of-words model (fastText style: the mean of learnt word embeddings, then a
linear layer) classifying movie-review sentences as positive or negative (Rotten Tomatoes
sentences, the source of SST-2; embeddings trained from scratch).

Writes {out_dir}/final_info.json = {"accuracy", "train_loss", "train_time_s"}.
"""
import argparse, json, os, time
from collections import Counter
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from rt_sentences import load_split

parser = argparse.ArgumentParser()
parser.add_argument("--out_dir", required=True)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--dry_run", action="store_true", help="tiny data, 1 step: a quick self-check")
args = parser.parse_args()

# -- config --
MAX_LEN = 48      # tokens kept per sentence (99 % are shorter)
MIN_COUNT = 2     # words seen fewer times in training map to <unk>
EMBED_DIM = 64
DROPOUT = 0.3
EPOCHS = 4
BATCH_SIZE = 32
LR = 5e-3

torch.manual_seed(args.seed)
np.random.seed(args.seed)
torch.set_num_threads(1)  # tiny ops gain little from a 2nd thread, and lose a lot on a busy machine
torch.use_deterministic_algorithms(True)

train_texts, train_labels, test_texts, test_labels = load_split()
if args.dry_run:  # every 30th / 8th sentence: both labels (the file lists positives first)
    train_texts, train_labels = train_texts[::30], train_labels[::30]
    test_texts, test_labels = test_texts[::8], test_labels[::8]
    EPOCHS = 1

# vocabulary from the training sentences only (the text is already lower-cased and tokenised)
counts = Counter(w for t in train_texts for w in t.split())
vocab = {"<pad>": 0, "<unk>": 1}
for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
    if c >= MIN_COUNT:
        vocab[w] = len(vocab)


def encode(texts):
    ids = np.zeros((len(texts), MAX_LEN), dtype=np.int64)  # padded with <pad> = 0
    for i, t in enumerate(texts):
        toks = [vocab.get(w, 1) for w in t.split()][:MAX_LEN]
        ids[i, :len(toks)] = toks
    return torch.from_numpy(ids)


x_train, y_train = encode(train_texts), torch.tensor(train_labels)
x_test, y_test = encode(test_texts), torch.tensor(test_labels)
n_train, n_test = len(y_train), len(y_test)
print(f"data: {n_train} train / {n_test} test sentences, vocabulary {len(vocab)}", flush=True)


class BagOfWords(nn.Module):
    def __init__(self, vocab_size, n_classes=2):
        super().__init__()
        # mean of the word vectors of a sentence; <pad> (id 0) is left out of the mean
        self.embed = nn.EmbeddingBag(vocab_size, EMBED_DIM, mode="mean", padding_idx=0)
        self.drop = nn.Dropout(DROPOUT)
        self.head = nn.Linear(EMBED_DIM, n_classes)

    def forward(self, x):  # x: [B, L] token ids
        return self.head(self.drop(self.embed(x)))


model = BagOfWords(len(vocab))
optimizer = torch.optim.Adam(model.parameters(), lr=LR)

t0 = time.time()
train_loss = float("nan")
for epoch in range(EPOCHS):
    model.train()
    perm = torch.randperm(n_train)
    losses = []
    for i in range(0, n_train - BATCH_SIZE + 1, BATCH_SIZE):
        idx = perm[i:i + BATCH_SIZE]
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if args.dry_run:
            break
    train_loss = float(np.mean(losses))
    print(f"epoch {epoch + 1}/{EPOCHS}  train_loss {train_loss:.4f}  time {time.time() - t0:.1f}s", flush=True)
train_time = time.time() - t0

model.eval()
with torch.no_grad():
    pred = torch.cat([model(x_test[i:i + 500]).argmax(1) for i in range(0, n_test, 500)])
accuracy = (pred == y_test).float().mean().item()
print(f"test accuracy {accuracy:.4f}")

os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "final_info.json"), "w") as f:
    json.dump({"accuracy": accuracy, "train_loss": train_loss, "train_time_s": train_time}, f, indent=2)
