"""A small decoder-only transformer in torch, sharded as tensor parallelism
shards it, computing over a paged KV cache.

Random weights from a fixed seed (every rank builds the same full model and
keeps its shard); RMSNorm; rotary positions; GQA (more query than KV heads);
attention heads and KV heads split over the TP ranks, the output projection
and the MLP's down projection reduced with an allreduce over the instance's
TP communicator; greedy decoding. The KV cache is a pool of pages per layer,
K and V each [num_pages, kv_heads_local, page_size, head_dim] (kvx's HND
layout), so that kvx can move it page by page.
"""

import dataclasses
import math

import torch


@dataclasses.dataclass(frozen=True)
class Config:
    vocab: int = 97
    hidden: int = 64
    q_heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    layers: int = 3
    ffn: int = 128
    page_size: int = 4
    seed: int = 20261201


class Model:
    def __init__(self, cfg, tp_size=1, tp_rank=0, comm=None, first_kv_head=None, kv_local=None):
        self.cfg, self.tp, self.comm = cfg, tp_size, comm
        g = torch.Generator().manual_seed(cfg.seed)

        def w(*shape, scale=None):
            return torch.randn(*shape, generator=g) * (scale or 1.0 / math.sqrt(shape[-1]))

        D, hd, F = cfg.hidden, cfg.head_dim, cfg.ffn
        qs = cfg.q_heads // tp_size
        self.q_local = qs
        self.kv_local = kv_local if kv_local is not None else max(cfg.kv_heads // tp_size, 1)
        first_kv = first_kv_head if first_kv_head is not None else tp_rank * self.kv_local
        q0, f0, fs = tp_rank * qs, tp_rank * (F // tp_size), F // tp_size
        self.embed = w(cfg.vocab, D, scale=1.0)
        self.layers = []
        for _ in range(cfg.layers):
            full = dict(
                wq=w(cfg.q_heads * hd, D),
                wk=w(cfg.kv_heads * hd, D),
                wv=w(cfg.kv_heads * hd, D),
                wo=w(D, cfg.q_heads * hd),
                w1=w(F, D),
                w2=w(D, F),
                n1=1.0 + 0.1 * w(D, scale=1.0),
                n2=1.0 + 0.1 * w(D, scale=1.0),
            )
            kv_rows = slice(first_kv * hd, (first_kv + self.kv_local) * hd)
            self.layers.append(
                dict(
                    wq=full["wq"][q0 * hd : (q0 + qs) * hd],
                    wk=full["wk"][kv_rows],
                    wv=full["wv"][kv_rows],
                    wo=full["wo"][:, q0 * hd : (q0 + qs) * hd],
                    w1=full["w1"][f0 : f0 + fs],
                    w2=full["w2"][:, f0 : f0 + fs],
                    n1=full["n1"],
                    n2=full["n2"],
                )
            )
        self.norm = 1.0 + 0.1 * w(D, scale=1.0)
        self.lm_head = w(cfg.vocab, D)
        # The GQA group of each local query head, in local KV heads. With TP
        # the local query heads of a rank use exactly its local KV heads.
        self.group = qs // self.kv_local

    def pool(self, num_pages):
        """A KV pool for this rank: [layer][K=0 / V=1] tensors (HND pages)."""
        c = self.cfg
        shape = (num_pages, self.kv_local, c.page_size, c.head_dim)
        return [[torch.zeros(shape) for _ in range(2)] for _ in range(c.layers)]

    def _allreduce(self, x):
        if self.tp > 1:
            from mpi4py import MPI

            x = x.contiguous()
            self.comm.Allreduce(MPI.IN_PLACE, x.numpy(), op=MPI.SUM)
        return x

    def _rope(self, x, pos):
        """x [T, heads, head_dim] rotated by positions pos [T]."""
        hd = x.shape[-1]
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        ang = pos[:, None].float() * inv[None, :]
        cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
        x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)

    @staticmethod
    def _rms(x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight

    def forward(self, pool, pages, tokens, start):
        """Runs tokens (positions start .. start+len-1) of one request whose
        KV lives in pool at pages (in token order); writes their K/V into the
        pages and returns the logits of the last token [vocab]."""
        c = self.cfg
        T, P, hd = len(tokens), c.page_size, c.head_dim
        end = start + T
        pos = torch.arange(start, end)
        page_of = torch.tensor([pages[p // P] for p in range(start, end)])
        slot_of = pos % P
        used = torch.tensor(pages[: -(-end // P)])
        x = self.embed[torch.tensor(tokens)]
        causal = torch.arange(end)[None, :] > pos[:, None]  # [T, end]
        for layer, lw in enumerate(self.layers):
            h = self._rms(x, lw["n1"])
            q = self._rope((h @ lw["wq"].T).view(T, self.q_local, hd), pos)
            k = self._rope((h @ lw["wk"].T).view(T, self.kv_local, hd), pos)
            v = (h @ lw["wv"].T).view(T, self.kv_local, hd)
            K, V = pool[layer]
            K[page_of, :, slot_of] = k
            V[page_of, :, slot_of] = v
            # [pages, heads, P, hd] -> [tokens, heads, hd], the first `end`.
            Ks = K[used].permute(0, 2, 1, 3).reshape(-1, self.kv_local, hd)[:end]
            Vs = V[used].permute(0, 2, 1, 3).reshape(-1, self.kv_local, hd)[:end]
            Ks = Ks.repeat_interleave(self.group, dim=1)
            Vs = Vs.repeat_interleave(self.group, dim=1)
            scores = torch.einsum("thd,nhd->htn", q, Ks) / math.sqrt(hd)
            scores = scores.masked_fill(causal[None], float("-inf"))
            att = torch.einsum("htn,nhd->thd", scores.softmax(-1), Vs).reshape(T, -1)
            x = x + self._allreduce(att @ lw["wo"].T)
            h = self._rms(x, lw["n2"])
            x = x + self._allreduce(torch.nn.functional.silu(h @ lw["w1"].T) @ lw["w2"].T)
        return self._rms(x[-1], self.norm) @ self.lm_head.T


def generate(model, pool, pages, prompt, steps, first=None, chunk_pages=None):
    """Greedy decoding: the prompt (in chunks of chunk_pages pages, or at
    once), then steps tokens. Returns (tokens, logits) of the generated ones.
    With first given the prompt is not run: its KV is already in the pages
    (the disaggregated decode), and first is its first token."""
    logits = []
    if first is None:
        n = len(prompt)
        step = chunk_pages * model.cfg.page_size if chunk_pages else n
        for s in range(0, n, step):
            out = model.forward(pool, pages, prompt[s : s + step], s)
        logits.append(out)
        first = int(out.argmax())
    tokens = [first]
    for i in range(steps - 1):
        out = model.forward(pool, pages, [tokens[-1]], len(prompt) + i)
        logits.append(out)
        tokens.append(int(out.argmax()))
    return tokens, logits
