/*
 * stream.c - the request stream: the same on every rank, drawn from the
 * seed, so that no rank has to tell another which requests exist.
 */
#include "demo.h"

#include <stdlib.h>

uint64_t demo_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* Request i: a prompt length uniform in [min, max] tokens (or row i of the
 * --trace, arriving when the trace says; with --rate, evenly spaced), the prefill
 * instance i mod A and the decode instance (i / A) mod C, so that every
 * prefill/decode pair serves requests. Room ids read as seed * 10^6 + i. */
demo_req_t *demo_requests(const demo_opts_t *o, const kvx_identity_t *id)
{
    demo_req_t *reqs = calloc(o->requests, sizeof(*reqs));
    uint64_t span = (uint64_t)o->max_tokens - o->min_tokens + 1;

    if (reqs == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < o->requests; i++) {
        demo_req_t *r = &reqs[i];

        r->index = i;
        r->id = o->seed * 1000000u + i;
        if (o->replay != NULL) { /* --trace: its prompts, on its clock */
            r->tokens = demo_trace_tokens(o->replay, i);
            r->arrival = demo_trace_arrival(o, i);
        } else {
            r->tokens = o->min_tokens + (uint32_t)(demo_mix(o->seed ^ demo_mix(i + 1)) % span);
            r->arrival = o->rate > 0 ? i / o->rate : 0;
        }
        r->npages = (r->tokens + o->kv.page_size - 1) / o->kv.page_size;
        r->prefill = (int)(i % (uint32_t)id->prefill_instances);
        r->decode = (int)(i / (uint32_t)id->prefill_instances % (uint32_t)id->decode_instances);
    }
    return reqs;
}
