"""PyTorch reference of the mosgrad language model (AWD-LSTM / Mixture-of-Softmaxes tradition).

This file is the executable form of the model spec the C++ side (nn/, lm/) implements.  It is used
by tools/gen_layer_fixtures.py (float64 reference values for the C++ tests) and by
bench/torch_bench.py (the PyTorch peer benchmark).  It is never imported at build or test time.

Shape legend used in the comments: B batch, T time, E embedding size, H hidden size (H_l for LSTM
layer l), V vocabulary, K experts, N = T*B (rows of the flattened output, row n = t*B + b).

References
  AWD-LSTM  Merity, Keskar, Socher, "Regularizing and Optimizing LSTM Language Models", ICLR 2018,
            and its code (salesforce/awd-lstm-lm): embedded_dropout, LockedDropout, WeightDrop.
  MoS       Yang, Dai, Salakhutdinov, Cohen, "Breaking the Softmax Bottleneck: A High-Rank RNN
            Language Model", ICLR 2018, and its code (zihangdai/mos):
              P(x|c) = sum_k pi_{c,k} softmax(h_{c,k}^T w_x + b_x),
              pi_{c,k} = softmax_k(w_{pi,k}^T g_c),   h_{c,k} = tanh(W_{h,k} g_c + b_{h,k})
            The same paper's "mixture of contexts" (MoC) baseline mixes before the softmax:
              P(x|c) = softmax((sum_k pi_{c,k} h_{c,k})^T w_x + b_x)   (still rank <= E+1).
  sigsoftmax Kanai, Fujiwara, Yamanaka, Adachi, "Sigsoftmax: Reanalysis of the Softmax
            Bottleneck", NeurIPS 2018:
              f(z)_i = exp(z_i) sigmoid(z_i) / sum_j exp(z_j) sigmoid(z_j)
            and its mixture ("MoSS", here `mosig`) that uses sigsoftmax in place of each softmax.

Parameter names (the spec; see RNNModel.spec_parameters):
  encoder.weight [V,E]
  rnns.<l>.weight_ih [4H_l,in_l], rnns.<l>.weight_hh [4H_l,H_l], rnns.<l>.bias_ih [4H_l],
  rnns.<l>.bias_hh [4H_l]          (gate rows in PyTorch order i, f, g, o)
  decoder.weight [V,in]            only when not tied (tied: the decoder weight IS encoder.weight)
  decoder.bias [V]
  prior.weight [K,H_last], latent.weight [K*E,H_last], latent.bias [K*E]   (mos, mosig, moc)

Every head is computed exactly in log space: no `prob + 1e-8` as in the MoS code, so the row
logsumexp of the returned log-probabilities is 0 even for logits of magnitude 50 and more.
"""

from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

HEADS = ("softmax", "mos", "sigsoftmax", "mosig", "moc")
MIXTURE_HEADS = ("mos", "mosig", "moc")


# ----------------------------------------------------------------------------------------------
# Dropouts (AWD-LSTM).  All are identities in eval mode or with p == 0.
# ----------------------------------------------------------------------------------------------

def embedded_dropout(weight, words, dropout, training):
    """Embedding lookup with whole-word dropout (AWD-LSTM `embedded_dropout`).

    weight [V,E], words [T,B] int64 -> [T,B,E].  With probability `dropout` a *row* of the
    embedding matrix (a word type, not a token) is zeroed for the whole forward pass; the kept
    rows are scaled by 1/(1-p) so the expectation is unchanged.
    """
    if training and dropout > 0:
        keep = weight.new_empty((weight.size(0), 1)).bernoulli_(1 - dropout) / (1 - dropout)  # [V,1]
        weight = weight * keep  # [V,E]; grads of dropped rows are exactly 0
    return F.embedding(words, weight)


class LockedDropout(nn.Module):
    """Variational dropout (AWD-LSTM `LockedDropout`): one mask [1,B,H] per sequence, shared by
    every time step, so the same units are dropped along the whole BPTT window."""

    def forward(self, x, dropout):  # x [T,B,H]
        if not self.training or not dropout:
            return x
        mask = x.new_empty((1, x.size(1), x.size(2))).bernoulli_(1 - dropout) / (1 - dropout)
        return x * mask  # broadcast over T


# ----------------------------------------------------------------------------------------------
# Heads: functions of the last LSTM output h [N,H_last] and the head parameters.  Shared by the
# model, the head fixtures and the benchmark's two loss forms.
# ----------------------------------------------------------------------------------------------

def log_sigsoftmax(z, dim=-1):
    """log sigsoftmax(z) = z + log sigmoid(z) - logsumexp_j(z_j + log sigmoid(z_j)).

    Kanai et al.: f(z)_i = exp(z_i) sigmoid(z_i) / sum_j exp(z_j) sigmoid(z_j); taking logs keeps
    it finite for any |z| (logsigmoid is the stable -softplus(-z))."""
    s = z + F.logsigmoid(z)
    return s - torch.logsumexp(s, dim=dim, keepdim=True)


def _mixture_parts(h, prior_w, latent_w, latent_b, latent_hook):
    """The MoS gating network and experts' contexts.

    h [N,H] -> log_prior [N,K] (log pi_{c,k} = log_softmax_k(h w_{pi,k})), latent [N,K,E]
    (h_{c,k} = tanh(W_{h,k} h + b_{h,k}); expert k of row n is latent[n, k*E:(k+1)*E] of the
    [N,K*E] matrix, exactly the MoS code's `latent.view(-1, ninp)` row order).
    `latent_hook` (train mode) applies the MoS `dropoutl` LockedDropout to the [N,K*E] latent."""
    K = prior_w.size(0)
    E = latent_w.size(0) // K
    log_prior = F.log_softmax(F.linear(h, prior_w), dim=-1)  # [N,K]
    latent = torch.tanh(F.linear(h, latent_w, latent_b))  # [N,K*E]
    if latent_hook is not None:
        latent = latent_hook(latent)
    return log_prior, latent.view(h.size(0), K, E)  # [N,K], [N,K,E]


def head_log_prob(kind, h, dec_w, dec_b, prior_w=None, latent_w=None, latent_b=None,
                  latent_hook=None):
    """Full log-probability matrix [N,V] of head `kind` for contexts h [N,H].

    dec_w [V,H] (softmax family) or [V,E] (mixture family), dec_b [V]."""
    if kind == "softmax":
        return F.log_softmax(F.linear(h, dec_w, dec_b), dim=-1)  # [N,V]
    if kind == "sigsoftmax":
        return log_sigsoftmax(F.linear(h, dec_w, dec_b), dim=-1)  # [N,V]
    if kind not in MIXTURE_HEADS:
        raise ValueError("unknown head %r" % kind)
    log_prior, latent = _mixture_parts(h, prior_w, latent_w, latent_b, latent_hook)
    N, K, E = latent.shape
    if kind == "moc":
        # MoC: mix the contexts, then one softmax: h_mix = sum_k pi_k h_k  [N,E]
        h_mix = (log_prior.exp().unsqueeze(2) * latent).sum(1)
        return F.log_softmax(F.linear(h_mix, dec_w, dec_b), dim=-1)  # [N,V]
    z = F.linear(latent.reshape(N * K, E), dec_w, dec_b)  # [N*K,V] logits of every expert
    comp = F.log_softmax(z, dim=-1) if kind == "mos" else log_sigsoftmax(z, dim=-1)
    # log P(x|c) = log sum_k pi_k P_k(x|c) = logsumexp_k(log pi_k + log P_k(x|c))
    return torch.logsumexp(comp.view(N, K, -1) + log_prior.unsqueeze(2), dim=1)  # [N,V]


def head_target_log_prob(kind, h, target, dec_w, dec_b, prior_w=None, latent_w=None,
                         latent_b=None, latent_hook=None):
    """log P(target_n | c_n) [N] without materialising the [N,V] (or [N,K,V]) log-prob matrix.

    The "gathered" loss form: each component's log-probability only at the target,
      mos:   logsumexp_k(log pi_k + z_k[t] - logsumexp_v z_k[v])
      mosig: logsumexp_k(log pi_k + s_k[t] - logsumexp_v s_k[v]),  s = z + log sigmoid(z)
    The logits at the target are recomputed as a dot product with the target's decoder row, so
    the backward pass never scatters into a [N*K,V] gradient.  Equal to
    head_log_prob(...).gather(1, target) up to rounding."""
    t = target.reshape(-1)  # [N]
    w_t = F.embedding(t, dec_w)  # [N,E] or [N,H]: decoder rows of the targets
    b_t = dec_b[t]  # [N]

    def component(z, z_t):  # z [R,V], z_t [R] -> log P_k(target) [R]
        if kind in ("sigsoftmax", "mosig"):
            z, z_t = z + F.logsigmoid(z), z_t + F.logsigmoid(z_t)
        return z_t - torch.logsumexp(z, dim=-1)

    if kind in ("softmax", "sigsoftmax"):
        z = F.linear(h, dec_w, dec_b)  # [N,V]
        return component(z, (h * w_t).sum(-1) + b_t)
    if kind not in MIXTURE_HEADS:
        raise ValueError("unknown head %r" % kind)
    log_prior, latent = _mixture_parts(h, prior_w, latent_w, latent_b, latent_hook)
    N, K, E = latent.shape
    if kind == "moc":
        h_mix = (log_prior.exp().unsqueeze(2) * latent).sum(1)  # [N,E]
        return component(F.linear(h_mix, dec_w, dec_b), (h_mix * w_t).sum(-1) + b_t)
    z = F.linear(latent.reshape(N * K, E), dec_w, dec_b)  # [N*K,V]
    z_t = (latent * w_t.unsqueeze(1)).sum(-1) + b_t.unsqueeze(1)  # [N,K]
    comp_t = component(z, z_t.reshape(N * K)).view(N, K)  # [N,K]
    return torch.logsumexp(log_prior + comp_t, dim=1)  # [N]


# ----------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------

def lstm_layer_sizes(ninp, nhid, nhidlast, nlayers, head, tie_weights):
    """[(in_l, H_l)] per layer.  in_0 = E, H_l = nhid for l < nlayers-1; the last layer's H is
    nhidlast for the mixture heads (their latent projection maps it to E), and for
    softmax/sigsoftmax it is E when tied (AWD-LSTM: h W^T needs H_last == E) else nhidlast."""
    if head in MIXTURE_HEADS or not tie_weights:
        last = nhidlast
    else:
        last = ninp
    sizes = []
    for l in range(nlayers):
        h = nhid if l != nlayers - 1 else last
        sizes.append((ninp if l == 0 else sizes[-1][1], h))
    return sizes


class RNNModel(nn.Module):
    """Embedding -> stack of single-layer LSTMs -> output head, as AWD-LSTM / MoS.

    forward(input [T,B] int64, hidden) -> (log_prob [N,V], new_hidden, raw_outputs, outputs)
      new_hidden: list over layers of (h [1,B,H_l], c [1,B,H_l])
      raw_outputs: per layer LSTM output [T,B,H_l] before dropout (AWD-LSTM TAR uses these)
      outputs:     per layer output after its dropout (dropouth, last layer: dropout); AR uses
                   the last one.
    """

    def __init__(self, ntoken, ninp, nhid, nhidlast, nlayers, head="softmax", n_experts=10,
                 tie_weights=True, dropout=0.5, dropouth=0.5, dropouti=0.5, dropoute=0.1,
                 wdrop=0.0, dropoutl=0.5):
        super().__init__()
        if head not in HEADS:
            raise ValueError("unknown head %r" % head)
        self.ntoken, self.ninp, self.nlayers, self.head = ntoken, ninp, nlayers, head
        self.n_experts = n_experts if head in MIXTURE_HEADS else 0
        self.tie_weights = tie_weights
        self.dropout, self.dropouth, self.dropouti = dropout, dropouth, dropouti
        self.dropoute, self.wdrop, self.dropoutl = dropoute, wdrop, dropoutl
        self.lockdrop = LockedDropout()

        self.encoder = nn.Embedding(ntoken, ninp)
        self.layer_sizes = lstm_layer_sizes(ninp, nhid, nhidlast, nlayers, head, tie_weights)
        # One single-layer nn.LSTM per layer (sizes differ per layer, and the dropouts sit
        # between layers).  nn.LSTM's default init: uniform(+-1/sqrt(H_l)) for all four tensors.
        self.rnns = nn.ModuleList([nn.LSTM(i, h, 1) for i, h in self.layer_sizes])
        h_last = self.layer_sizes[-1][1]

        if head in MIXTURE_HEADS:
            self.prior = nn.Linear(h_last, n_experts, bias=False)  # w_pi  [K,H_last]
            self.latent = nn.Linear(h_last, n_experts * ninp)  # W_h   [K*E,H_last]
            dec_in = ninp
        else:
            dec_in = h_last
        self.decoder = nn.Linear(dec_in, ntoken)
        if tie_weights:
            if dec_in != ninp:
                raise ValueError("tied decoder needs decoder input %d == E %d" % (dec_in, ninp))
            self.decoder.weight = self.encoder.weight  # shared Parameter: one tensor, one grad

        # The references' init (AWD-LSTM / MoS init_weights); prior/latent keep nn.Linear's.
        self.encoder.weight.data.uniform_(-0.1, 0.1)
        if not tie_weights:
            self.decoder.weight.data.uniform_(-0.1, 0.1)
        self.decoder.bias.data.zero_()

    # -- parameters under the spec's names ----------------------------------------------------
    def spec_parameters(self):
        """OrderedDict spec name -> Parameter (nn.LSTM calls its tensors weight_ih_l0 etc.; the
        spec and the C++ side say rnns.<l>.weight_ih).  A tied decoder weight is not listed."""
        p = OrderedDict()
        p["encoder.weight"] = self.encoder.weight
        for l, rnn in enumerate(self.rnns):
            for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                p["rnns.%d.%s" % (l, n)] = getattr(rnn, n + "_l0")
        if not self.tie_weights:
            p["decoder.weight"] = self.decoder.weight
        p["decoder.bias"] = self.decoder.bias
        if self.head in MIXTURE_HEADS:
            p["prior.weight"] = self.prior.weight
            p["latent.weight"] = self.latent.weight
            p["latent.bias"] = self.latent.bias
        return p

    def init_hidden(self, bsz):
        w = self.encoder.weight
        return [(w.new_zeros(1, bsz, h), w.new_zeros(1, bsz, h)) for _, h in self.layer_sizes]

    # -- forward ------------------------------------------------------------------------------
    def _run_lstm(self, l, x, hx):
        rnn = self.rnns[l]
        if not (self.training and self.wdrop):
            out, (h, c) = rnn(x, hx)
            return out, (h, c)
        # WeightDrop (AWD-LSTM): DropConnect on the recurrent matrix, one mask [4H,H] per
        # forward pass, shared by every time step.  AWD-LSTM swaps the module's parameter for
        # the dropped tensor; on PyTorch >= 1.x that fights nn.LSTM's cached _flat_weights, so we
        # call the same fused kernel nn.LSTM.forward calls, with the dropped matrix in place.
        w_hh = F.dropout(rnn.weight_hh_l0, self.wdrop, training=True)
        weights = [rnn.weight_ih_l0, w_hh, rnn.bias_ih_l0, rnn.bias_hh_l0]
        out, h, c = torch._VF.lstm(x, hx, weights, True, 1, 0.0, True, False, False)
        return out, (h, c)

    def features(self, input, hidden):
        """input [T,B] -> (output [T,B,H_last] after the final dropout, new_hidden, raw_outputs,
        outputs); everything before the head."""
        emb = embedded_dropout(self.encoder.weight, input, self.dropoute, self.training)  # [T,B,E]
        raw_output = self.lockdrop(emb, self.dropouti)
        new_hidden, raw_outputs, outputs = [], [], []
        for l in range(self.nlayers):
            raw_output, new_h = self._run_lstm(l, raw_output, hidden[l])  # [T,B,H_l]
            new_hidden.append(new_h)
            raw_outputs.append(raw_output)
            if l != self.nlayers - 1:
                raw_output = self.lockdrop(raw_output, self.dropouth)
                outputs.append(raw_output)
        output = self.lockdrop(raw_output, self.dropout)  # [T,B,H_last]
        outputs.append(output)
        return output, new_hidden, raw_outputs, outputs

    def _head_args(self, T, B):
        args = dict(dec_w=self.decoder.weight, dec_b=self.decoder.bias)
        if self.head in MIXTURE_HEADS:
            def latent_hook(latent):  # [N,K*E] -> MoS dropoutl, one mask per sequence
                return self.lockdrop(latent.view(T, B, -1), self.dropoutl).view(T * B, -1)
            args.update(prior_w=self.prior.weight, latent_w=self.latent.weight,
                        latent_b=self.latent.bias, latent_hook=latent_hook)
        return args

    def forward(self, input, hidden):
        T, B = input.shape
        output, new_hidden, raw_outputs, outputs = self.features(input, hidden)
        h = output.reshape(T * B, -1)  # [N,H_last], row n = t*B + b
        log_prob = head_log_prob(self.head, h, **self._head_args(T, B))  # [N,V]
        return log_prob, new_hidden, raw_outputs, outputs

    def target_log_prob(self, input, hidden, target):
        """Like forward but returns only log P(target) [N] (the "gathered" loss form)."""
        T, B = input.shape
        output, new_hidden, raw_outputs, outputs = self.features(input, hidden)
        h = output.reshape(T * B, -1)
        lp = head_target_log_prob(self.head, h, target, **self._head_args(T, B))  # [N]
        return lp, new_hidden, raw_outputs, outputs


def repackage_hidden(hidden):
    """Cut the graph between BPTT windows (truncated backprop), keeping the values."""
    return [(h.detach(), c.detach()) for h, c in hidden]
