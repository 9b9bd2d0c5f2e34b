/*
 * _kvx.c - the CPython extension under the kvx package: one Python call per
 * kvx call, no policy. The package (kvx/__init__.py) turns Python objects
 * (numpy arrays, torch tensors, mpi4py communicators) into addresses and
 * handles before they reach this file.
 *
 * Calls that take the context's lock or may wait (creation, destruction,
 * agreement) release the GIL; kvx's progress thread never calls back into
 * Python, so nothing here runs on it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <kvx.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Set by the package at import (kvx._kvx._register): the exception class that
 * takes a failure record (a dict), and the room states as its enum members. */
static PyObject *kvxpy_error_class;
static PyObject *kvxpy_states; /* tuple indexed by kvx_room_state_t */

/* ---- failure records ------------------------------------------------------ */

static PyObject *kvxpy_record(const kvx_failure_t *f, const char *line)
{
    PyObject *room = f->has_room ? PyLong_FromUnsignedLongLong(f->room_id) : Py_NewRef(Py_None);

    return Py_BuildValue(
        "{s:i,s:s,s:s,s:s,s:N,s:i,s:s,s:i,s:i,s:O,s:I,s:s,s:s,s:s}", "status", (int)f->status,
        "status_name", kvx_status_name(f->status), "message", kvx_status_string(f->status), "stage",
        kvx_stage_name(f->stage), "room", room, "origin_rank", f->origin_rank, "origin_role",
        kvx_role_name(f->origin_role), "origin_instance", f->origin_instance, "origin_tp",
        f->origin_tp_rank, "injected", (f->flags & KVX_FAILURE_INJECTED) ? Py_True : Py_False,
        "count", f->count, "foreign", f->foreign, "text", f->text, "line", line);
}

/* A failure record as a Python dict, with kvx's one-line format as "line". */
static PyObject *kvxpy_failure_dict(const kvx_failure_t *f)
{
    char line[600];

    kvx_failure_format(f, line, sizeof(line));
    return kvxpy_record(f, line);
}

static PyObject *kvxpy_raise_record(PyObject *record)
{
    PyObject *exc;

    if (record == NULL) {
        return NULL;
    }
    if (kvxpy_error_class == NULL) {
        PyErr_SetObject(PyExc_RuntimeError, record);
        Py_DECREF(record);
        return NULL;
    }
    exc = PyObject_CallOneArg(kvxpy_error_class, record);
    Py_DECREF(record);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* Raises the failure of a call that returned a reason record. */
static PyObject *kvxpy_raise_failure(const kvx_failure_t *f)
{
    return kvxpy_raise_record(kvxpy_failure_dict(f));
}

/* Raises a call's bare status: the record names the call, no origin. */
static PyObject *kvxpy_raise_status(kvx_status_t status, const char *call, int has_room,
                                    uint64_t room)
{
    kvx_failure_t f;
    char line[400];

    memset(&f, 0, sizeof(f));
    f.status = status;
    f.stage = KVX_STAGE_INIT;
    f.has_room = has_room;
    f.room_id = room;
    f.origin_rank = f.origin_instance = f.origin_tp_rank = -1;
    snprintf(f.text, sizeof(f.text), "%s: %s", call, kvx_status_string(status));
    if (has_room) {
        snprintf(line, sizeof(line), "%s for room %llu: %s", kvx_status_name(status),
                 (unsigned long long)room, f.text);
    } else {
        snprintf(line, sizeof(line), "%s: %s", kvx_status_name(status), f.text);
    }
    return kvxpy_raise_record(kvxpy_record(&f, line));
}

/* ---- helpers ------------------------------------------------------------- */

/* Page ids from a buffer of uint32 (numpy, array('I')) or any sequence of
 * ints. *owned is set when the ids were copied and must be freed. */
static int kvxpy_pages(PyObject *obj, Py_buffer *view, uint32_t **pages, size_t *n, int *owned)
{
    PyObject *seq;
    Py_ssize_t len;

    *owned = 0;
    view->obj = NULL;
    if (PyObject_CheckBuffer(obj) &&
        PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0) {
        if (view->itemsize == 4 && view->format != NULL &&
            (strcmp(view->format, "I") == 0 || strcmp(view->format, "=I") == 0 ||
             strcmp(view->format, "<I") == 0)) {
            *pages = view->buf;
            *n = (size_t)(view->len / 4);
            return 0;
        }
        PyBuffer_Release(view);
        view->obj = NULL;
    }
    PyErr_Clear();
    seq = PySequence_Fast(obj, "pages must be a sequence of page ids or a uint32 buffer");
    if (seq == NULL) {
        return -1;
    }
    len = PySequence_Fast_GET_SIZE(seq);
    *pages = malloc((size_t)(len > 0 ? len : 1) * sizeof(uint32_t));
    if (*pages == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        unsigned long v = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(seq, i));

        if ((v == (unsigned long)-1 && PyErr_Occurred()) || v > UINT32_MAX) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_OverflowError, "a page id does not fit in 32 bits");
            }
            free(*pages);
            Py_DECREF(seq);
            return -1;
        }
        (*pages)[i] = (uint32_t)v;
    }
    Py_DECREF(seq);
    *n = (size_t)len;
    *owned = 1;
    return 0;
}

static void kvxpy_pages_release(Py_buffer *view, uint32_t *pages, int owned)
{
    if (owned) {
        free(pages);
    } else if (view->obj != NULL) {
        PyBuffer_Release(view);
    }
}

static PyObject *kvxpy_state(kvx_room_state_t st)
{
    if (kvxpy_states != NULL && (unsigned)st < (unsigned)PyTuple_GET_SIZE(kvxpy_states)) {
        return Py_NewRef(PyTuple_GET_ITEM(kvxpy_states, st));
    }
    return PyLong_FromLong((long)st);
}

/* ---- the Context type ------------------------------------------------------ */

typedef struct {
    PyObject_HEAD kvx_ctx_t *ctx;
} kvxpy_ctx_t;

static int kvxpy_ctx_live(kvxpy_ctx_t *self)
{
    if (self->ctx == NULL) {
        kvxpy_raise_status(KVX_ERR_INVALID_HANDLE, "the context is destroyed", 0, 0);
        return 0;
    }
    return 1;
}

static int kvxpy_addr_list(PyObject *list, void ***out, size_t *n)
{
    PyObject *seq = PySequence_Fast(list, "buffers must be a sequence of addresses");
    Py_ssize_t len;

    if (seq == NULL) {
        return -1;
    }
    len = PySequence_Fast_GET_SIZE(seq);
    *out = calloc((size_t)(len > 0 ? len : 1), sizeof(void *));
    if (*out == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        (*out)[i] = PyLong_AsVoidPtr(PySequence_Fast_GET_ITEM(seq, i));
        if (PyErr_Occurred()) {
            free(*out);
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    *n = (size_t)len;
    return 0;
}

static int kvxpy_ctx_init(kvxpy_ctx_t *self, PyObject *args, PyObject *kw)
{
    static char *names[] = { "comm_f",   "layout",      "layers",      "page_size",     "kv_heads",
                             "head_dim", "dtype",       "attn",        "page_layout",   "num_pages",
                             "buffers",  "slab",        "aux_slots",   "aux_item_size", "fault",
                             "mem_type", "cuda_device", "page_stride", "verify",        NULL };
    kvx_ctx_params_t p;
    kvx_failure_t why;
    kvx_status_t st;
    kvx_ctx_t *ctx = NULL;
    int comm_f, dtype = KVX_DTYPE_BF16, attn = KVX_ATTN_MHA, page_layout = KVX_PAGE_HND;
    int mem_type = KVX_MEM_HOST, cuda_device = 0, verify = KVX_VERIFY_DEFAULT;
    Py_ssize_t page_stride = 0;
    const char *layout = NULL, *fault = NULL;
    PyObject *buffers = Py_None, *slab = Py_None;
    void **bufs = NULL;
    size_t nbufs = 0;

    if (self->ctx != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the context is already created");
        return -1;
    }
    kvx_ctx_params_init(&p);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "izIIII|iiinOOnnziini", names, &comm_f, &layout,
                                     &p.kv.layers, &p.kv.page_size, &p.kv.kv_heads, &p.kv.head_dim,
                                     &dtype, &attn, &page_layout, &p.num_pages, &buffers, &slab,
                                     &p.aux_slots, &p.aux_item_size, &fault, &mem_type,
                                     &cuda_device, &page_stride, &verify)) {
        return -1;
    }
    p.layout = layout;
    p.fault = fault;
    p.page_stride = (size_t)page_stride;
    p.verify = (kvx_verify_t)verify;
    p.kv.dtype = (kvx_dtype_t)dtype;
    p.kv.attn = (kvx_attn_t)attn;
    p.kv.page_layout = (kvx_page_layout_t)page_layout;
    p.mem_type = (kvx_mem_type_t)mem_type;
    p.cuda_device = cuda_device;
    if (buffers != Py_None) {
        if (kvxpy_addr_list(buffers, &bufs, &nbufs) != 0) {
            return -1;
        }
        p.buffers = bufs;
    }
    if (slab != Py_None) {
        p.slab = PyLong_AsVoidPtr(slab);
        if (PyErr_Occurred()) {
            free(bufs);
            return -1;
        }
    }
    memset(&why, 0, sizeof(why));
    /* Collective: every rank waits for the others here. */
    Py_BEGIN_ALLOW_THREADS st = kvx_ctx_create_f((MPI_Fint)comm_f, &p, &ctx, &why);
    Py_END_ALLOW_THREADS free(bufs);
    if (st != KVX_OK) {
        kvxpy_raise_failure(&why);
        return -1;
    }
    self->ctx = ctx;
    return 0;
}

static PyObject *kvxpy_ctx_destroy(kvxpy_ctx_t *self, PyObject *unused)
{
    kvx_ctx_t *ctx = self->ctx;
    kvx_status_t st;

    if (ctx == NULL) {
        Py_RETURN_NONE;
    }
    self->ctx = NULL;
    Py_BEGIN_ALLOW_THREADS st = kvx_ctx_destroy(ctx);
    Py_END_ALLOW_THREADS if (st != KVX_OK)
    {
        return kvxpy_raise_status(st, "kvx_ctx_destroy", 0, 0);
    }
    Py_RETURN_NONE;
}

static void kvxpy_ctx_dealloc(kvxpy_ctx_t *self)
{
    /* Destruction is collective: a context dropped without destroy() on
     * one rank only would hang the others, so it is left to the process's
     * end rather than destroyed here. */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *kvxpy_ctx_identity(kvxpy_ctx_t *self, PyObject *unused)
{
    kvx_identity_t id;
    kvx_status_t st;

    if (!kvxpy_ctx_live(self)) {
        return NULL;
    }
    st = kvx_ctx_identity(self->ctx, &id);
    if (st != KVX_OK) {
        return kvxpy_raise_status(st, "kvx_ctx_identity", 0, 0);
    }
    return Py_BuildValue("{s:i,s:i,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "world_rank", id.world_rank,
                         "world_size", id.world_size, "role", kvx_role_name(id.role), "instance",
                         id.instance, "tp_rank", id.tp_rank, "tp_size", id.tp_size,
                         "prefill_instances", id.prefill_instances, "prefill_tp", id.prefill_tp,
                         "decode_instances", id.decode_instances, "decode_tp", id.decode_tp);
}

static PyObject *kvxpy_ctx_tp_comm_f(kvxpy_ctx_t *self, PyObject *unused)
{
    if (!kvxpy_ctx_live(self)) {
        return NULL;
    }
    return PyLong_FromLong((long)kvx_ctx_tp_comm_f(self->ctx));
}

static PyObject *kvxpy_ctx_geometry(kvxpy_ctx_t *self, PyObject *unused)
{
    unsigned first, count;
    kvx_status_t st;

    if (!kvxpy_ctx_live(self)) {
        return NULL;
    }
    st = kvx_ctx_heads(self->ctx, &first, &count);
    if (st != KVX_OK) {
        return kvxpy_raise_status(st, "kvx_ctx_heads", 0, 0);
    }
    return Py_BuildValue("(IIn)", first, count, (Py_ssize_t)kvx_ctx_page_bytes(self->ctx));
}

static PyObject *kvxpy_ctx_kv_buffer(kvxpy_ctx_t *self, PyObject *args)
{
    unsigned layer, comp;
    void *buf;
    size_t len;
    kvx_status_t st;

    if (!PyArg_ParseTuple(args, "II", &layer, &comp) || !kvxpy_ctx_live(self)) {
        return NULL;
    }
    st = kvx_ctx_kv_buffer(self->ctx, layer, comp, &buf, &len);
    if (st != KVX_OK) {
        return kvxpy_raise_status(st, "kvx_ctx_kv_buffer", 0, 0);
    }
    return Py_BuildValue("(Nn)", PyLong_FromVoidPtr(buf), (Py_ssize_t)len);
}

static PyObject *kvxpy_ctx_mem_path(kvxpy_ctx_t *self, PyObject *unused)
{
    kvx_mem_path_t path;
    char reason[512];
    kvx_status_t st;

    if (!kvxpy_ctx_live(self)) {
        return NULL;
    }
    st = kvx_ctx_mem_path(self->ctx, &path, reason, sizeof(reason));
    if (st != KVX_OK) {
        return kvxpy_raise_status(st, "kvx_ctx_mem_path", 0, 0);
    }
    return Py_BuildValue("(ss)", kvx_mem_path_name(path), reason);
}

static PyObject *kvxpy_ctx_pair_status(kvxpy_ctx_t *self, PyObject *args)
{
    int other;
    kvx_failure_t why;
    kvx_status_t st;

    if (!PyArg_ParseTuple(args, "i", &other) || !kvxpy_ctx_live(self)) {
        return NULL;
    }
    memset(&why, 0, sizeof(why));
    st = kvx_ctx_pair_status(self->ctx, other, &why);
    if (st == KVX_OK) {
        Py_RETURN_NONE;
    }
    if (st == KVX_ERR_KV_MISMATCH || st == KVX_ERR_BUSY || st == KVX_ERR_PEER_LOST) {
        return kvxpy_failure_dict(&why);
    }
    return kvxpy_raise_status(st, "kvx_ctx_pair_status", 0, 0);
}

static PyObject *kvxpy_ctx_membership(kvxpy_ctx_t *self, PyObject *noargs)
{
    uint64_t epoch = 0;
    kvx_status_t st;

    (void)noargs;
    if (!kvxpy_ctx_live(self)) {
        return NULL;
    }
    st = kvx_ctx_membership(self->ctx, &epoch);
    if (st != KVX_OK) {
        return kvxpy_raise_status(st, "kvx_ctx_membership", 0, 0);
    }
    return PyLong_FromUnsignedLongLong(epoch);
}

static PyObject *kvxpy_ctx_join_address(kvxpy_ctx_t *self, PyObject *noargs)
{
    char addr[128];
    kvx_status_t st;

    (void)noargs;
    if (!kvxpy_ctx_live(self)) {
        return NULL;
    }
    st = kvx_ctx_join_address(self->ctx, addr, sizeof(addr));
    if (st == KVX_ERR_STATE) {
        Py_RETURN_NONE;
    }
    if (st != KVX_OK) {
        return kvxpy_raise_status(st, "kvx_ctx_join_address", 0, 0);
    }
    return PyUnicode_FromString(addr);
}

static PyObject *kvxpy_ctx_recv_open(kvxpy_ctx_t *self, PyObject *args)
{
    unsigned long long room;
    int instance, owned;
    long long aux_slot = -1;
    PyObject *pages_obj;
    Py_buffer view;
    uint32_t *pages;
    size_t n;
    kvx_status_t st;

    if (!PyArg_ParseTuple(args, "KiO|L", &room, &instance, &pages_obj, &aux_slot) ||
        !kvxpy_ctx_live(self) || kvxpy_pages(pages_obj, &view, &pages, &n, &owned) != 0) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS st =
        kvx_room_recv_open(self->ctx, room, instance, pages, n, (int64_t)aux_slot);
    Py_END_ALLOW_THREADS kvxpy_pages_release(&view, pages, owned);
    if (st != KVX_OK) {
        return kvxpy_raise_status(st, "kvx_room_recv_open", 1, room);
    }
    Py_RETURN_NONE;
}

static PyObject *kvxpy_ctx_send_open(kvxpy_ctx_t *self, PyObject *args)
{
    unsigned long long room;
    int instance;
    Py_ssize_t total;
    kvx_status_t st;

    if (!PyArg_ParseTuple(args, "Kin", &room, &instance, &total) || !kvxpy_ctx_live(self)) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS st = kvx_room_send_open(self->ctx, room, instance, (size_t)total);
    Py_END_ALLOW_THREADS if (st != KVX_OK)
    {
        return kvxpy_raise_status(st, "kvx_room_send_open", 1, room);
    }
    Py_RETURN_NONE;
}

/* send_chunk(room, pages, aux=None) (every layer: nlayers 0 here) and
 * send_layers(room, pages, first_layer, nlayers, aux=None, event=0). */
static PyObject *kvxpy_ctx_send(kvxpy_ctx_t *self, PyObject *args, int layerwise)
{
    unsigned long long room, event = 0;
    unsigned int first_layer = 0, nlayers = 0;
    PyObject *pages_obj;
    Py_buffer view, aux = { 0 };
    uint32_t *pages;
    size_t n;
    int owned, ok;
    kvx_status_t st;
    const char *call = layerwise ? "kvx_room_send_layers" : "kvx_room_send_chunk";

    ok = layerwise ? PyArg_ParseTuple(args, "KOII|z*K", &room, &pages_obj, &first_layer, &nlayers,
                                      &aux, &event)
                   : PyArg_ParseTuple(args, "KO|z*", &room, &pages_obj, &aux);
    if (!ok || !kvxpy_ctx_live(self)) {
        PyBuffer_Release(&aux);
        return NULL;
    }
    if (kvxpy_pages(pages_obj, &view, &pages, &n, &owned) != 0) {
        PyBuffer_Release(&aux);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS st =
        layerwise ? kvx_room_send_layers(self->ctx, room, pages, n, first_layer, nlayers,
                                         (void *)(uintptr_t)event, aux.buf,
                                         aux.buf != NULL ? (size_t)aux.len : 0)
                  : kvx_room_send_chunk(self->ctx, room, pages, n, aux.buf,
                                        aux.buf != NULL ? (size_t)aux.len : 0);
    Py_END_ALLOW_THREADS kvxpy_pages_release(&view, pages, owned);
    PyBuffer_Release(&aux);
    if (st != KVX_OK) {
        return kvxpy_raise_status(st, call, 1, room);
    }
    Py_RETURN_NONE;
}

static PyObject *kvxpy_ctx_send_chunk(kvxpy_ctx_t *self, PyObject *args)
{
    return kvxpy_ctx_send(self, args, 0);
}

static PyObject *kvxpy_ctx_send_layers(kvxpy_ctx_t *self, PyObject *args)
{
    return kvxpy_ctx_send(self, args, 1);
}

static PyObject *kvxpy_ctx_poll(kvxpy_ctx_t *self, PyObject *arg)
{
    unsigned long long room = PyLong_AsUnsignedLongLong(arg);
    kvx_room_state_t state;
    kvx_status_t st;

    if ((room == (unsigned long long)-1 && PyErr_Occurred()) || !kvxpy_ctx_live(self)) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS st = kvx_room_poll(self->ctx, room, &state);
    Py_END_ALLOW_THREADS if (st != KVX_OK)
    {
        return kvxpy_raise_status(st, "kvx_room_poll", 1, room);
    }
    return kvxpy_state(state);
}

static PyObject *kvxpy_ctx_failure(kvxpy_ctx_t *self, PyObject *arg)
{
    unsigned long long room = PyLong_AsUnsignedLongLong(arg);
    kvx_failure_t f;
    kvx_status_t st;

    if ((room == (unsigned long long)-1 && PyErr_Occurred()) || !kvxpy_ctx_live(self)) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS st = kvx_room_failure(self->ctx, room, &f);
    Py_END_ALLOW_THREADS if (st == KVX_ERR_STATE)
    {
        Py_RETURN_NONE;
    }
    if (st != KVX_OK) {
        return kvxpy_raise_status(st, "kvx_room_failure", 1, room);
    }
    return kvxpy_failure_dict(&f);
}

static PyObject *kvxpy_ctx_abort(kvxpy_ctx_t *self, PyObject *args)
{
    unsigned long long room;
    const char *reason = "aborted by the application";
    kvx_status_t st;

    if (!PyArg_ParseTuple(args, "K|s", &room, &reason) || !kvxpy_ctx_live(self)) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS st = kvx_room_abort(self->ctx, room, reason);
    Py_END_ALLOW_THREADS if (st != KVX_OK)
    {
        return kvxpy_raise_status(st, "kvx_room_abort", 1, room);
    }
    Py_RETURN_NONE;
}

static PyObject *kvxpy_ctx_aux(kvxpy_ctx_t *self, PyObject *args)
{
    unsigned long long room;
    Py_ssize_t cap = 4096;
    PyObject *out;
    size_t len = 0;
    kvx_status_t st;

    if (!PyArg_ParseTuple(args, "K|n", &room, &cap) || !kvxpy_ctx_live(self)) {
        return NULL;
    }
    out = PyBytes_FromStringAndSize(NULL, cap);
    if (out == NULL) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS st =
        kvx_room_aux(self->ctx, room, PyBytes_AS_STRING(out), (size_t)cap, &len);
    Py_END_ALLOW_THREADS if (st != KVX_OK)
    {
        Py_DECREF(out);
        return kvxpy_raise_status(st, "kvx_room_aux", 1, room);
    }
    if (_PyBytes_Resize(&out, (Py_ssize_t)len) != 0) {
        return NULL;
    }
    return out;
}

static PyObject *kvxpy_ctx_info(kvxpy_ctx_t *self, PyObject *arg)
{
    static const char *const pages[] = { "in_use", "draining", "released", "quarantined" };
    unsigned long long room = PyLong_AsUnsignedLongLong(arg);
    kvx_room_info_t i;
    kvx_status_t st;

    if ((room == (unsigned long long)-1 && PyErr_Occurred()) || !kvxpy_ctx_live(self)) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS st = kvx_room_info(self->ctx, room, &i);
    Py_END_ALLOW_THREADS if (st != KVX_OK)
    {
        return kvxpy_raise_status(st, "kvx_room_info", 1, room);
    }
    return Py_BuildValue(
        "{s:N,s:s,s:i,s:n,s:n,s:K,s:K,s:I,s:I,s:I,s:s,s:O,s:N}", "state", kvxpy_state(i.state),
        "side", kvx_role_name(i.side), "peer_instance", i.peer_instance, "npages",
        (Py_ssize_t)i.npages, "pages_sent", (Py_ssize_t)i.pages_sent, "puts",
        (unsigned long long)i.puts, "bytes", (unsigned long long)i.bytes, "writers", i.writers,
        "writers_done", i.writers_done, "targets", i.targets, "pages",
        (unsigned)i.pages < 4 ? pages[i.pages] : "?", "agreed", i.agreed ? Py_True : Py_False,
        "agreed_state", i.agreed ? kvxpy_state(i.agreed_state) : Py_NewRef(Py_None));
}

/* Returns the status name for OK, BUSY and QUARANTINED (the caller decides
 * what to do with the pages); raises for the others. */
static PyObject *kvxpy_ctx_close(kvxpy_ctx_t *self, PyObject *arg)
{
    unsigned long long room = PyLong_AsUnsignedLongLong(arg);
    kvx_status_t st;

    if ((room == (unsigned long long)-1 && PyErr_Occurred()) || !kvxpy_ctx_live(self)) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS st = kvx_room_close(self->ctx, room);
    Py_END_ALLOW_THREADS if (st != KVX_OK && st != KVX_ERR_BUSY && st != KVX_ERR_QUARANTINED)
    {
        return kvxpy_raise_status(st, "kvx_room_close", 1, room);
    }
    return PyLong_FromLong((long)st);
}

/* ---- agreement rounds ------------------------------------------------------ */

typedef struct {
    PyObject_HEAD kvx_agree_t *agree;
    PyObject *owner; /* the Context, kept alive while the round is */
    uint64_t *rooms;
    kvx_agreed_t *out;
    size_t n;
    int done;
} kvxpy_agree_t;

static PyTypeObject kvxpy_agree_type;

static PyObject *kvxpy_ctx_agree_start(kvxpy_ctx_t *self, PyObject *arg)
{
    PyObject *seq;
    kvxpy_agree_t *a;
    Py_ssize_t n;
    kvx_status_t st;

    if (!kvxpy_ctx_live(self)) {
        return NULL;
    }
    seq = PySequence_Fast(arg, "rooms must be a sequence of room ids");
    if (seq == NULL) {
        return NULL;
    }
    n = PySequence_Fast_GET_SIZE(seq);
    a = PyObject_New(kvxpy_agree_t, &kvxpy_agree_type);
    if (a == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    a->agree = NULL;
    a->owner = Py_NewRef((PyObject *)self);
    a->n = (size_t)n;
    a->done = 0;
    a->rooms = malloc((size_t)(n > 0 ? n : 1) * sizeof(uint64_t));
    a->out = malloc((size_t)(n > 0 ? n : 1) * sizeof(kvx_agreed_t));
    if (a->rooms == NULL || a->out == NULL) {
        Py_DECREF(seq);
        Py_DECREF(a);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        a->rooms[i] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (PyErr_Occurred()) {
            Py_DECREF(seq);
            Py_DECREF(a);
            return NULL;
        }
    }
    Py_DECREF(seq);
    Py_BEGIN_ALLOW_THREADS st =
        kvx_agree_start(self->ctx, n > 0 ? a->rooms : NULL, a->n, &a->agree);
    Py_END_ALLOW_THREADS if (st != KVX_OK)
    {
        Py_DECREF(a);
        return kvxpy_raise_status(st, "kvx_agree_start", 0, 0);
    }
    return (PyObject *)a;
}

/* The round's outcome: a list of (room, status, state) in the order of the
 * rooms given, status as a kvx status code. */
static PyObject *kvxpy_agree_result(kvxpy_agree_t *a, kvx_status_t st)
{
    PyObject *list = PyList_New((Py_ssize_t)a->n);

    if (list == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < a->n; i++) {
        PyObject *t = Py_BuildValue("(KiN)", (unsigned long long)a->rooms[i], (int)a->out[i].status,
                                    kvxpy_state(a->out[i].state));

        if (t == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return Py_BuildValue("(iN)", (int)st, list);
}

static PyObject *kvxpy_agree_finish(kvxpy_agree_t *a, kvx_status_t st, const char *call)
{
    if (st == KVX_INPROGRESS) {
        Py_RETURN_NONE;
    }
    if (st != KVX_OK && st != KVX_ERR_PEER_LOST) {
        return kvxpy_raise_status(st, call, 0, 0);
    }
    a->done = 1;
    return kvxpy_agree_result(a, st);
}

static PyObject *kvxpy_agree_test(kvxpy_agree_t *a, PyObject *unused)
{
    kvx_status_t st;

    if (a->agree == NULL || a->done) {
        PyErr_SetString(PyExc_RuntimeError, "the agreement round is finished");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS st = kvx_agree_test(a->agree, a->out);
    Py_END_ALLOW_THREADS return kvxpy_agree_finish(a, st, "kvx_agree_test");
}

static PyObject *kvxpy_agree_wait(kvxpy_agree_t *a, PyObject *unused)
{
    kvx_status_t st;

    if (a->agree == NULL || a->done) {
        PyErr_SetString(PyExc_RuntimeError, "the agreement round is finished");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS st = kvx_agree_wait(a->agree, a->out);
    Py_END_ALLOW_THREADS return kvxpy_agree_finish(a, st, "kvx_agree_wait");
}

static void kvxpy_agree_dealloc(kvxpy_agree_t *a)
{
    /* A round still in progress cannot be freed (kvx_agree_free says
     * KVX_ERR_BUSY); it is leaked rather than left half-collective. */
    if (a->agree != NULL && kvx_agree_free(a->agree) != KVX_OK) {
        a->agree = NULL;
    }
    free(a->rooms);
    free(a->out);
    Py_XDECREF(a->owner);
    PyObject_Free(a);
}

static PyMethodDef kvxpy_agree_methods[] = {
    { "test", (PyCFunction)kvxpy_agree_test, METH_NOARGS,
      "Advances the round without blocking: None while in progress, else (status, [(room, "
      "status, state)])." },
    { "wait", (PyCFunction)kvxpy_agree_wait, METH_NOARGS,
      "Blocks (GIL released) until the round is done; returns as test() does." },
    { NULL, NULL, 0, NULL }
};

static PyTypeObject kvxpy_agree_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kvx._kvx.Agree",
    .tp_basicsize = sizeof(kvxpy_agree_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One round of agreement (kvx_agree_start/test/wait/free).",
    .tp_dealloc = (destructor)kvxpy_agree_dealloc,
    .tp_methods = kvxpy_agree_methods,
};

/* ---- measurement: the C loops the Python layer is compared with ---------- */

static double kvxpy_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* bench_c("poll", rooms, n): seconds for n kvx_room_poll() calls in C (over
 * the rooms in turn); bench_c("agree", rooms, n): seconds for n whole
 * agreement rounds (start, wait, free) in C -- collective over TP, like the
 * Python rounds it is compared with. Releases the GIL. */
static PyObject *kvxpy_ctx_bench_c(kvxpy_ctx_t *self, PyObject *args)
{
    const char *kind;
    PyObject *rooms_obj, *seq;
    Py_ssize_t n, nrooms;
    uint64_t *rooms;
    kvx_agreed_t *out;
    kvx_status_t st = KVX_OK;
    double t0, t1;

    if (!PyArg_ParseTuple(args, "sOn", &kind, &rooms_obj, &n) || !kvxpy_ctx_live(self)) {
        return NULL;
    }
    seq = PySequence_Fast(rooms_obj, "rooms must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    nrooms = PySequence_Fast_GET_SIZE(seq);
    rooms = calloc((size_t)nrooms + 1, sizeof(*rooms));
    out = calloc((size_t)nrooms + 1, sizeof(*out));
    for (Py_ssize_t i = 0; rooms != NULL && i < nrooms; i++) {
        rooms[i] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seq, i));
    }
    Py_DECREF(seq);
    if (rooms == NULL || out == NULL || nrooms == 0 || PyErr_Occurred()) {
        free(rooms);
        free(out);
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "rooms needed");
    }
    Py_BEGIN_ALLOW_THREADS t0 = kvxpy_now();
    for (Py_ssize_t i = 0; i < n && st == KVX_OK; i++) {
        if (strcmp(kind, "poll") == 0) {
            kvx_room_state_t state;

            st = kvx_room_poll(self->ctx, rooms[i % nrooms], &state);
        } else {
            kvx_agree_t *a;

            st = kvx_agree_start(self->ctx, rooms, (size_t)nrooms, &a);
            if (st == KVX_OK) {
                st = kvx_agree_wait(a, out);
                kvx_agree_free(a);
            }
        }
    }
    t1 = kvxpy_now();
    Py_END_ALLOW_THREADS free(rooms);
    free(out);
    if (st != KVX_OK) {
        return kvxpy_raise_status(st, "bench_c", 0, 0);
    }
    return PyFloat_FromDouble(t1 - t0);
}

static PyMethodDef kvxpy_ctx_methods[] = {
    { "destroy", (PyCFunction)kvxpy_ctx_destroy, METH_NOARGS, "kvx_ctx_destroy (collective)." },
    { "identity", (PyCFunction)kvxpy_ctx_identity, METH_NOARGS, "kvx_ctx_identity as a dict." },
    { "tp_comm_f", (PyCFunction)kvxpy_ctx_tp_comm_f, METH_NOARGS,
      "The TP communicator's Fortran handle." },
    { "geometry", (PyCFunction)kvxpy_ctx_geometry, METH_NOARGS,
      "(first_head, heads, page_bytes) of this rank." },
    { "kv_buffer", (PyCFunction)kvxpy_ctx_kv_buffer, METH_VARARGS,
      "(address, length) of one (layer, component) buffer." },
    { "mem_path", (PyCFunction)kvxpy_ctx_mem_path, METH_NOARGS, "(path name, reason)." },
    { "pair_status", (PyCFunction)kvxpy_ctx_pair_status, METH_VARARGS,
      "None, or the mismatch record of a pair of instances." },
    { "membership", (PyCFunction)kvxpy_ctx_membership, METH_NOARGS,
      "kvx_ctx_membership: the epoch of joins, replacements and departures" },
    { "join_address", (PyCFunction)kvxpy_ctx_join_address, METH_NOARGS,
      "kvx_ctx_join_address: where this rank takes joiners, or None" },
    { "recv_open", (PyCFunction)kvxpy_ctx_recv_open, METH_VARARGS,
      "recv_open(room, prefill_instance, pages, aux_slot=-1)" },
    { "send_open", (PyCFunction)kvxpy_ctx_send_open, METH_VARARGS,
      "send_open(room, decode_instance, npages_total)" },
    { "send_chunk", (PyCFunction)kvxpy_ctx_send_chunk, METH_VARARGS,
      "send_chunk(room, pages, aux=None)" },
    { "send_layers", (PyCFunction)kvxpy_ctx_send_layers, METH_VARARGS,
      "send_layers(room, pages, first_layer, nlayers, aux=None, event=0)" },
    { "poll", (PyCFunction)kvxpy_ctx_poll, METH_O, "The room's local state." },
    { "failure", (PyCFunction)kvxpy_ctx_failure, METH_O,
      "The room's failure record (a dict), or None when it has not failed." },
    { "abort", (PyCFunction)kvxpy_ctx_abort, METH_VARARGS, "abort(room, reason)" },
    { "aux", (PyCFunction)kvxpy_ctx_aux, METH_VARARGS, "aux(room, capacity=4096) -> bytes" },
    { "info", (PyCFunction)kvxpy_ctx_info, METH_O, "kvx_room_info as a dict." },
    { "close", (PyCFunction)kvxpy_ctx_close, METH_O,
      "kvx_room_close: KVX_OK, KVX_ERR_BUSY or KVX_ERR_QUARANTINED as an int." },
    { "bench_c", (PyCFunction)kvxpy_ctx_bench_c, METH_VARARGS,
      "bench_c(kind, rooms, n): seconds of n C calls (\"poll\") or rounds (\"agree\")." },
    { "agree_start", (PyCFunction)kvxpy_ctx_agree_start, METH_O,
      "Starts a round of agreement over the given rooms (collective over TP)." },
    { NULL, NULL, 0, NULL }
};

static PyTypeObject kvxpy_ctx_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kvx._kvx.Context",
    .tp_basicsize = sizeof(kvxpy_ctx_t),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A kvx context (kvx_ctx_t); use kvx.Context.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)kvxpy_ctx_init,
    .tp_dealloc = (destructor)kvxpy_ctx_dealloc,
    .tp_methods = kvxpy_ctx_methods,
};

/* ---- module functions ----------------------------------------------------- */

static PyObject *kvxpy_version(PyObject *m, PyObject *unused)
{
    return PyUnicode_FromString(kvx_version());
}

static PyObject *kvxpy_versions(PyObject *m, PyObject *unused)
{
    kvx_versions_t v;

    if (kvx_versions(&v) != KVX_OK) {
        return kvxpy_raise_status(KVX_ERR_INTERNAL, "kvx_versions", 0, 0);
    }
    return Py_BuildValue("{s:s,s:s,s:s,s:s,s:s}", "kvx", v.kvx, "mpi", v.mpi, "ucx", v.ucx, "hwloc",
                         v.hwloc, "cuda", v.cuda);
}

/* The tables of include/kvx.h, so that Python never copies a number. */
static PyObject *kvxpy_tables(PyObject *m, PyObject *unused)
{
    PyObject *statuses = PyList_New(0), *states = PyList_New(0), *stages = PyList_New(0);
    PyObject *item;

    if (statuses == NULL || states == NULL || stages == NULL) {
        goto err;
    }
#define KVXPY_STATUS_(name, value, msg)                                                            \
    item =                                                                                         \
        Py_BuildValue("(iss)", value, kvx_status_name(KVX_##name), kvx_status_string(KVX_##name)); \
    if (item == NULL || PyList_Append(statuses, item) != 0) {                                      \
        Py_XDECREF(item);                                                                          \
        goto err;                                                                                  \
    }                                                                                              \
    Py_DECREF(item);
    KVX_STATUS_MAP(KVXPY_STATUS_)
#undef KVXPY_STATUS_
    for (int s = KVX_ROOM_FAILED; s <= KVX_ROOM_SUCCESS; s++) {
        item = Py_BuildValue("(is)", s, kvx_room_state_name((kvx_room_state_t)s));
        if (item == NULL || PyList_Append(states, item) != 0) {
            Py_XDECREF(item);
            goto err;
        }
        Py_DECREF(item);
    }
    for (int s = 0; s < KVX_STAGE_COUNT; s++) {
        item = Py_BuildValue("(is)", s, kvx_stage_name((kvx_stage_t)s));
        if (item == NULL || PyList_Append(stages, item) != 0) {
            Py_XDECREF(item);
            goto err;
        }
        Py_DECREF(item);
    }
    return Py_BuildValue(
        "{s:N,s:N,s:N,s:{s:i,s:i,s:i,s:i},s:{s:i,s:i},s:{s:i,s:i,s:i},s:{s:i,s:i}}", "statuses",
        statuses, "states", states, "stages", stages, "dtypes", "bf16", KVX_DTYPE_BF16, "fp16",
        KVX_DTYPE_FP16, "fp8", KVX_DTYPE_FP8, "fp32", KVX_DTYPE_FP32, "attn", "mha", KVX_ATTN_MHA,
        "mla", KVX_ATTN_MLA, "page_layouts", "hnd", KVX_PAGE_HND, "nhd", KVX_PAGE_NHD, "head_major",
        KVX_PAGE_HEAD_MAJOR, "mem_types", "host", KVX_MEM_HOST, "cuda", KVX_MEM_CUDA);
err:
    Py_XDECREF(statuses);
    Py_XDECREF(states);
    Py_XDECREF(stages);
    return NULL;
}

static PyObject *kvxpy_rank_shape(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = { "layers", "page_size",   "kv_heads", "head_dim", "dtype",
                             "attn",   "page_layout", "tp_size",  "tp_rank",  NULL };
    kvx_kv_layout_t kv;
    int dtype, attn, page_layout, tp_size, tp_rank;
    unsigned first, heads;
    size_t bytes;
    kvx_failure_t why;
    kvx_status_t st;

    memset(&kv, 0, sizeof(kv));
    if (!PyArg_ParseTupleAndKeywords(args, kw, "IIIIiiiii", names, &kv.layers, &kv.page_size,
                                     &kv.kv_heads, &kv.head_dim, &dtype, &attn, &page_layout,
                                     &tp_size, &tp_rank)) {
        return NULL;
    }
    kv.dtype = (kvx_dtype_t)dtype;
    kv.attn = (kvx_attn_t)attn;
    kv.page_layout = (kvx_page_layout_t)page_layout;
    memset(&why, 0, sizeof(why));
    st = kvx_kv_rank_shape(&kv, tp_size, tp_rank, &first, &heads, &bytes, &why);
    if (st != KVX_OK) {
        return kvxpy_raise_failure(&why);
    }
    return Py_BuildValue("(IIn)", first, heads, (Py_ssize_t)bytes);
}

static PyObject *kvxpy_register(PyObject *m, PyObject *args)
{
    PyObject *error_class, *states;

    if (!PyArg_ParseTuple(args, "OO!", &error_class, &PyTuple_Type, &states)) {
        return NULL;
    }
    Py_XSETREF(kvxpy_error_class, Py_NewRef(error_class));
    Py_XSETREF(kvxpy_states, Py_NewRef(states));
    Py_RETURN_NONE;
}

static PyMethodDef kvxpy_methods[] = {
    { "version", kvxpy_version, METH_NOARGS, "kvx's version." },
    { "versions", kvxpy_versions, METH_NOARGS, "kvx_versions() as a dict." },
    { "tables", kvxpy_tables, METH_NOARGS, "The status, state and stage tables of kvx.h." },
    { "rank_shape", (PyCFunction)(void (*)(void))kvxpy_rank_shape, METH_VARARGS | METH_KEYWORDS,
      "kvx_kv_rank_shape: (first_head, heads, page_bytes)." },
    { "_register", kvxpy_register, METH_VARARGS, "Set by the package at import." },
    { NULL, NULL, 0, NULL }
};

static struct PyModuleDef kvxpy_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_kvx",
    .m_doc = "kvx's C API, one call per call (use the kvx package).",
    .m_size = -1,
    .m_methods = kvxpy_methods,
};

PyMODINIT_FUNC PyInit__kvx(void);

PyMODINIT_FUNC PyInit__kvx(void)
{
    PyObject *m;

    if (PyType_Ready(&kvxpy_ctx_type) < 0 || PyType_Ready(&kvxpy_agree_type) < 0) {
        return NULL;
    }
    m = PyModule_Create(&kvxpy_module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "Context", (PyObject *)&kvxpy_ctx_type) < 0 ||
        PyModule_AddObjectRef(m, "Agree", (PyObject *)&kvxpy_agree_type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
