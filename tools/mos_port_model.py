"""The model of tools/mos_port.py: AWD-LSTM's regularised LSTM with the Mixture-of-Softmaxes head.

A port, written anew for today's PyTorch, of zihangdai/mos `model.py` (with salesforce/awd-lstm-lm's
`embed_regularize.py`, `locked_dropout.py` and `weight_drop.py`). See tools/mos_port.py for what
differs from the reference code. PyTorch only; never imported by the build or the tests.

Shapes: T time, B batch, E embedding, H hidden, V vocabulary, K experts, N = T*B.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def embedded_dropout(weight, words, p, training):
    """Embedding lookup dropping whole word types (AWD-LSTM `embedded_dropout`): weight [V,E],
    words [T,B] -> [T,B,E]; one mask [V,1] per forward, kept rows scaled by 1/(1-p)."""
    if training and p > 0:
        mask = weight.new_empty((weight.size(0), 1)).bernoulli_(1 - p).div_(1 - p)
        weight = weight * mask
    return F.embedding(words, weight)


def locked_dropout(x, p, training):
    """Variational dropout (AWD-LSTM `LockedDropout`): x [T,B,D], one mask [1,B,D] for all T."""
    if not training or p <= 0:
        return x
    mask = x.new_empty((1, x.size(1), x.size(2))).bernoulli_(1 - p).div_(1 - p)
    return x * mask


class TargetLogSoftmax(torch.autograd.Function):
    """log softmax(logits)[r, target_r] for each row r: logits [R,V], targets [R] -> [R].

    The same function as F.log_softmax(logits, 1).gather(1, t), with one softmax pass forward
    and, backward, the gradient g (onehot - p) from the saved probabilities: one pass of
    exp over [R,V] per step instead of two (log_softmax forward and backward), and no zero-filled
    [R,V] buffer from nll_loss's backward. A speed-up only (the MoS head's [N*K,V] is the bulk).
    """

    @staticmethod
    def forward(ctx, logits, targets):
        p = torch.softmax(logits, 1)                                            # [R,V]
        idx = targets.unsqueeze(1)
        logp = p.gather(1, idx).squeeze(1).log()
        tiny = logp < -60.0  # p_t near float32's underflow: take x_t - logsumexp(x) instead
        if bool(tiny.any()):
            rows = logits[tiny]
            logp[tiny] = rows.gather(1, idx[tiny]).squeeze(1) - torch.logsumexp(rows, 1)
        ctx.save_for_backward(p, idx)
        return logp

    @staticmethod
    def backward(ctx, g):
        p, idx = ctx.saved_tensors
        grad = p * (-g.unsqueeze(1))     # d log p_t / d x_j = [j == t] - p_j, times g
        grad.scatter_add_(1, idx, g.unsqueeze(1))
        return grad, None


class WeightDropLSTM(nn.Module):
    """One LSTM layer with DropConnect on its hidden-to-hidden weights (AWD-LSTM `WeightDrop` on
    `weight_hh_l0`): every forward in training mode draws a new element-wise mask of W_hh (scaled
    by 1/(1-p)) and runs the ATen LSTM kernel (the one nn.LSTM calls) with the dropped matrix,
    so the gradient reaches the raw weight through the mask. Replaces the reference's trick of
    deleting the module's Parameter and setattr-ing a tensor, which today's nn.LSTM rejects.

    Parameters as nn.LSTM's (gate rows i, f, g, o; init U(+-1/sqrt(H))); W_hh is `weight_hh_raw`.
    """

    def __init__(self, ninp, nhid, wdrop):
        super().__init__()
        self.ninp, self.nhid, self.wdrop = ninp, nhid, wdrop
        self.weight_ih = nn.Parameter(torch.empty(4 * nhid, ninp))
        self.weight_hh_raw = nn.Parameter(torch.empty(4 * nhid, nhid))
        self.bias_ih = nn.Parameter(torch.empty(4 * nhid))
        self.bias_hh = nn.Parameter(torch.empty(4 * nhid))
        r = 1.0 / math.sqrt(nhid)
        for w in self.parameters():
            nn.init.uniform_(w, -r, r)

    def forward(self, x, hidden):
        """x [T,B,in], hidden (h [1,B,H], c [1,B,H]) -> y [T,B,H], (h_T, c_T)."""
        w_hh = F.dropout(self.weight_hh_raw, p=self.wdrop, training=self.training) \
            if self.wdrop > 0 else self.weight_hh_raw
        weights = [self.weight_ih, w_hh, self.bias_ih, self.bias_hh]
        # torch._VF.lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
        # batch_first): the CPU kernel computes x W_ih^T for all T in one GEMM, then steps in C++.
        y, h, c = torch._VF.lstm(x, hidden, weights, True, 1, 0.0, self.training, False, False)
        return y, (h, c)


class MoSModel(nn.Module):
    """Embedding (tied decoder) -> dropoute, dropouti -> LSTM layers (wdrop; dropouth between) ->
    dropout -> head. Head `mos` (Yang et al. 2017):
        latent = tanh(W_l g + b_l) [N,K*E] -> dropoutl (locked) -> [N*K,E]
        prior  = softmax(W_p g) [N,K]  (no bias)
        p(x)   = sum_k prior_k softmax(latent_k W_dec^T + b_dec)_x ; loss -log(p(x) + 1e-8)
    Head `softmax` (AWD-LSTM): log softmax(g W_dec^T + b_dec); needs nhidlast == emsize when tied.
    """

    def __init__(self, ntoken, emsize, nhid, nhidlast, nlayers, n_experts=5, head="mos",
                 tied=True, dropout=0.4, dropouth=0.25, dropouti=0.0, dropoute=0.1,
                 dropoutl=0.4, wdrop=0.5):
        super().__init__()
        if head == "softmax" and tied and nhidlast != emsize:
            raise ValueError(f"--head softmax --tied true needs nhidlast == emsize "
                             f"({nhidlast} != {emsize})")
        self.ntoken, self.emsize, self.nhid, self.nhidlast = ntoken, emsize, nhid, nhidlast
        self.nlayers, self.n_experts, self.head, self.tied = nlayers, n_experts, head, tied
        self.dropout, self.dropouth, self.dropouti = dropout, dropouth, dropouti
        self.dropoute, self.dropoutl = dropoute, dropoutl
        self.encoder = nn.Embedding(ntoken, emsize)
        sizes = [nhid if l != nlayers - 1 else nhidlast for l in range(nlayers)]
        self.rnns = nn.ModuleList(
            WeightDropLSTM(emsize if l == 0 else sizes[l - 1], sizes[l], wdrop)
            for l in range(nlayers))
        if head == "mos":
            self.prior = nn.Linear(nhidlast, n_experts, bias=False)
            self.latent = nn.Linear(nhidlast, n_experts * emsize)
        self.decoder_bias = nn.Parameter(torch.zeros(ntoken))
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        if not tied:
            dec_in = emsize if head == "mos" else nhidlast
            self.decoder_weight = nn.Parameter(torch.empty(ntoken, dec_in).uniform_(-0.1, 0.1))

    def dec_weight(self):
        return self.encoder.weight if self.tied else self.decoder_weight

    def init_hidden(self, bsz):
        w = self.encoder.weight
        return [(w.new_zeros(1, bsz, r.nhid), w.new_zeros(1, bsz, r.nhid)) for r in self.rnns]

    def body(self, words, hidden):
        """words [T,B] -> last layer's dropped output [T,B,Hlast], its raw output, new hidden."""
        x = embedded_dropout(self.encoder.weight, words, self.dropoute, self.training)
        x = locked_dropout(x, self.dropouti, self.training)
        new_hidden = []
        for l, rnn in enumerate(self.rnns):
            x, hc = rnn(x, hidden[l])
            new_hidden.append(hc)
            raw = x
            if l != self.nlayers - 1:
                x = locked_dropout(x, self.dropouth, self.training)
        out = locked_dropout(raw, self.dropout, self.training)
        return out, raw, new_hidden

    def _mos_parts(self, out):
        """out [T,B,Hlast] -> expert logits [N,K,V], log prior [N,K]."""
        T, B = out.size(0), out.size(1)
        latent = torch.tanh(self.latent(out))                                   # [T,B,K*E]
        latent = locked_dropout(latent, self.dropoutl, self.training)
        logits = F.linear(latent.view(-1, self.emsize), self.dec_weight(), self.decoder_bias)
        log_prior = F.log_softmax(self.prior(out).view(T * B, self.n_experts), -1)
        return logits.view(T * B, self.n_experts, self.ntoken), log_prior

    def token_nll(self, out, targets, fused=True):
        """Negative log-likelihood of each target: out [T,B,Hlast], targets [T,B] -> [N]."""
        y = targets.reshape(-1)
        if self.head == "softmax":
            logits = F.linear(out.view(-1, out.size(2)), self.dec_weight(), self.decoder_bias)
            if fused:
                return -TargetLogSoftmax.apply(logits, y)
            return F.cross_entropy(logits, y, reduction="none")
        logits, log_prior = self._mos_parts(out)
        N, K, V = logits.shape
        if fused:
            # Only the targets' probabilities: log softmax_k(x) per expert, mixed in log space;
            # the same function as the reference's log(sum_k prior_k softmax_k + 1e-8), without
            # the [N,V] mixture.
            lp = TargetLogSoftmax.apply(logits.view(N * K, V), y.repeat_interleave(K)).view(N, K)
            logp = torch.logsumexp(log_prior + lp, dim=1)
        else:  # the reference's computation, the whole distribution
            prob = F.softmax(logits, -1)
            prob = (prob * log_prior.exp().unsqueeze(2)).sum(1)                     # [N,V]
            logp = torch.log(prob.add_(1e-8)).gather(1, y.unsqueeze(1)).squeeze(1)
            return -logp
        return -torch.logaddexp(logp, torch.full_like(logp, math.log(1e-8)))

    def forward(self, words, hidden, targets, fused=True):
        """-> mean NLL, per-token NLL [N], dropped last output, raw last output, new hidden."""
        out, raw, new_hidden = self.body(words, hidden)
        nll = self.token_nll(out, targets, fused)
        return nll.mean(), nll, out, raw, new_hidden
