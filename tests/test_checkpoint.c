/* Checkpoints: parameters and Adam state round-trip exactly (training resumed from a checkpoint
 * continues bit-identically), the metadata is there, and every refused load (wrong shape,
 * missing or unknown tensor in strict mode, not a checkpoint) names the problem and changes
 * nothing. Checkpoint averaging gives the element-wise mean and refuses mismatched files. */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[64];

typedef struct model {
    attn_params *p;
    attn_optim *opt; /* Adam, or NULL */
} model;

/* Parameters "w" (3, 4), "b" (4), "ln.weight" (w_last) filled from seed; an extra "extra" (2)
 * when asked; Adam when with_opt. */
static model make_model(uint64_t seed, int64_t w_last, bool extra, bool with_opt)
{
    model m = {attn_params_new(), NULL};
    const int64_t sw[2] = {3, 4}, sb[1] = {4}, sl[1] = {w_last}, se[1] = {2};
    attn_tensor *ts[4] = {attn_params_add(m.p, "w", 2, sw), attn_params_add(m.p, "b", 1, sb),
                          attn_params_add(m.p, "ln.weight", 1, sl),
                          extra ? attn_params_add(m.p, "extra", 1, se) : NULL};
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    for (int i = 0; i < 4; i++)
        if (ts[i]) attn_tensor_fill_normal(ts[i], &rng, 0.0f, 1.0f);
    if (with_opt) {
        attn_optim_config cfg = attn_optim_defaults(ATTN_OPTIM_ADAM);
        cfg.lr = 0.01f;
        m.opt = attn_optim_new(m.p, &cfg);
    }
    return m;
}

static void free_model(model m)
{
    attn_optim_free(m.opt);
    attn_params_free(m.p);
}

/* One optimizer step with gradients that depend only on the step number. */
static void train_step(model m, int step)
{
    attn_params_zero_grad(m.p);
    float *g = attn_params_grad_block(m.p);
    for (int64_t i = 0; i < attn_params_numel(m.p); i++) g[i] = sinf((float)(i + 7 * step));
    TK_OK(attn_optim_step(m.opt));
}

/* A copy of every parameter value, then every state value. */
static float *snapshot(model m, int64_t *n)
{
    int64_t np = attn_params_numel(m.p), ns = 0;
    for (size_t i = 0; m.opt && i < attn_optim_state_count(m.opt); i++) {
        int64_t k;
        attn_optim_state_at(m.opt, i, NULL, NULL, &k);
        ns += k;
    }
    float *out = malloc((size_t)(np + ns) * sizeof *out), *at = out;
    for (size_t i = 0; i < attn_params_count(m.p); i++) {
        attn_tensor *t = attn_params_at(m.p, i);
        memcpy(at, t->data, (size_t)t->numel * sizeof *at);
        at += t->numel;
    }
    for (size_t i = 0; m.opt && i < attn_optim_state_count(m.opt); i++) {
        float *d;
        int64_t k;
        attn_optim_state_at(m.opt, i, NULL, &d, &k);
        memcpy(at, d, (size_t)k * sizeof *at);
        at += k;
    }
    *n = np + ns;
    return out;
}

static bool same_as(model m, const float *snap, int64_t n)
{
    int64_t k;
    float *now = snapshot(m, &k);
    bool same = k == n && memcmp(now, snap, (size_t)n * sizeof *now) == 0;
    free(now);
    return same;
}

/* The load must fail with status and a message containing `needle`, and change nothing. */
static void expect_refused(const char *what, const char *path, model m, bool strict, attn_status status,
                           const char *needle)
{
    int64_t n;
    float *before = snapshot(m, &n);
    int64_t steps = attn_optim_step_count(m.opt);
    attn_status s = attn_checkpoint_load(path, m.p, m.opt, strict);
    TK_CHECK(s == status && strstr(attn_last_error(), needle), "%s: expected %s mentioning \"%s\", got %s: %s", what,
             attn_status_name(status), needle, attn_status_name(s), attn_last_error());
    printf("  refused (%s): %s\n", what, attn_last_error());
    TK_CHECK(same_as(m, before, n) && attn_optim_step_count(m.opt) == steps, "%s: a refused load changed the model",
             what);
    free(before);
}

static void test_resume(const char *path)
{
    model a = make_model(1, 5, false, true);
    for (int s = 1; s <= 3; s++) train_step(a, s);
    const char *meta[4] = {"epoch", "2", "note", "resumable"};
    TK_OK(attn_checkpoint_save(path, a.p, a.opt, meta, 2));

    attn_st_file *f = attn_st_open(path);
    TK_NOT_NULL(f);
    const char *fmt = attn_st_metadata(f, "format"), *ver = attn_st_metadata(f, "version"),
               *step = attn_st_metadata(f, "step"), *epoch = attn_st_metadata(f, "epoch");
    TK_CHECK(fmt && !strcmp(fmt, "attn-checkpoint") && ver && !strcmp(ver, "1") && step && !strcmp(step, "3") &&
                 epoch && !strcmp(epoch, "2"),
             "checkpoint metadata missing or wrong");
    TK_CHECK(attn_st_find(f, "w") && attn_st_find(f, "exp_avg.w") && attn_st_find(f, "exp_avg_sq.b"),
             "parameters and Adam state are stored under their names");
    attn_st_close(f);

    model b = make_model(2, 5, false, true);
    TK_OK(attn_checkpoint_load(path, b.p, b.opt, true));
    int64_t n;
    float *snap = snapshot(a, &n);
    TK_CHECK(same_as(b, snap, n), "loaded parameters and state differ from the saved ones");
    TK_CHECK(attn_optim_step_count(b.opt) == 3, "step count %lld restored, expected 3",
             (long long)attn_optim_step_count(b.opt));
    free(snap);
    for (int s = 4; s <= 5; s++) {
        train_step(a, s);
        train_step(b, s);
    }
    snap = snapshot(a, &n);
    TK_CHECK(same_as(b, snap, n), "training resumed from a checkpoint is not bit-identical");
    free(snap);

    const char *reserved[2] = {"step", "9"};
    TK_CHECK(attn_checkpoint_save(path, a.p, a.opt, reserved, 1) == ATTN_ERR_ARG,
             "a reserved metadata key must be refused");
    free_model(a);
    free_model(b);
}

static void test_refusals(const char *path, const char *dir)
{
    model saved = make_model(3, 5, false, true);
    train_step(saved, 1);
    TK_OK(attn_checkpoint_save(path, saved.p, saved.opt, NULL, 0));

    model wrong_shape = make_model(4, 6, false, true); /* ln.weight (6), the file has (5) */
    expect_refused("shape", path, wrong_shape, false, ATTN_ERR_SHAPE,
                   "wrong shape 3: \"ln.weight\" (5) in the file, (6) in the module");
    free_model(wrong_shape);

    model more = make_model(5, 5, true, false); /* has "extra", the file does not */
    expect_refused("missing parameter", path, more, true, ATTN_ERR_FORMAT, "missing 1: \"extra\"");
    TK_OK(attn_checkpoint_load(path, more.p, NULL, false));
    TK_CHECK(attn_params_get(more.p, "b")->data[0] == attn_params_get(saved.p, "b")->data[0],
             "a non-strict load still loads what is there");
    free_model(more);

    /* no optimizer (inference): the training checkpoint loads strictly, its state skipped */
    model plain = make_model(6, 5, false, false);
    TK_OK(attn_checkpoint_load(path, plain.p, NULL, true));
    TK_CHECK(attn_params_get(plain.p, "w")->data[0] == attn_params_get(saved.p, "w")->data[0],
             "a strict load without optimizer loads the parameters");
    /* a tensor that is neither a parameter nor some parameter's state: named when strict */
    attn_st_writer *sw = attn_st_writer_new();
    for (size_t i = 0; i < attn_params_count(saved.p); i++)
        TK_OK(attn_st_writer_add_tensor(sw, attn_params_name(saved.p, i), attn_params_at(saved.p, i)));
    TK_OK(attn_st_writer_add_tensor(sw, "stray", attn_params_get(saved.p, "b")));
    TK_OK(attn_st_writer_add_tensor(sw, "exp_avg.nothing", attn_params_get(saved.p, "b")));
    TK_OK(attn_st_writer_set_metadata(sw, "format", "attn-checkpoint"));
    TK_OK(attn_st_writer_set_metadata(sw, "version", "1"));
    char stray_path[160];
    snprintf(stray_path, sizeof stray_path, "%s/stray.safetensors", dir);
    TK_OK(attn_st_writer_save(sw, stray_path));
    expect_refused("unknown tensors", stray_path, plain, true, ATTN_ERR_FORMAT,
                   "unexpected 2: \"stray\", \"exp_avg.nothing\"");
    TK_OK(attn_checkpoint_load(stray_path, plain.p, NULL, false));
    /* a non-finite value is refused, strict or not, naming the tensor and the element */
    attn_tensor *b = attn_params_get(saved.p, "b");
    float keep = b->data[2];
    b->data[2] = NAN;
    TK_OK(attn_checkpoint_save(stray_path, saved.p, NULL, NULL, 0));
    b->data[2] = keep;
    expect_refused("NaN parameter", stray_path, plain, false, ATTN_ERR_NUMERIC, "tensor \"b\" has NaN at index (2)");
    attn_st_writer_free(sw);
    remove(stray_path);
    free_model(plain);

    /* a params-only checkpoint: strict into an optimizer fails, non-strict keeps its state */
    char params_only[160];
    snprintf(params_only, sizeof params_only, "%s/params.safetensors", dir);
    TK_OK(attn_checkpoint_save(params_only, saved.p, NULL, NULL, 0));
    model with_opt = make_model(7, 5, false, true);
    train_step(with_opt, 1);
    expect_refused("no optimizer state", params_only, with_opt, true, ATTN_ERR_FORMAT, "step");
    TK_OK(attn_checkpoint_load(params_only, with_opt.p, with_opt.opt, false));
    TK_CHECK(attn_optim_step_count(with_opt.opt) == 1, "a params-only load kept the step count");
    TK_OK(attn_checkpoint_load(params_only, with_opt.p, NULL, true));
    free_model(with_opt);

    /* not a checkpoint, a newer version, a missing file */
    model m = make_model(8, 5, false, true);
    attn_st_writer *w = attn_st_writer_new();
    TK_OK(attn_st_writer_add_tensor(w, "w", attn_params_get(m.p, "w")));
    TK_OK(attn_st_writer_save(w, path));
    expect_refused("no format", path, m, false, ATTN_ERR_FORMAT, "not an attn checkpoint");
    TK_OK(attn_st_writer_set_metadata(w, "format", "attn-checkpoint"));
    TK_OK(attn_st_writer_set_metadata(w, "version", "2"));
    TK_OK(attn_st_writer_save(w, path));
    expect_refused("version", path, m, false, ATTN_ERR_FORMAT, "version \"2\"");
    TK_OK(attn_st_writer_set_metadata(w, "version", "1"));
    TK_OK(attn_st_writer_set_metadata(w, "step", "-4"));
    TK_OK(attn_st_writer_save(w, path));
    expect_refused("bad step", path, m, false, ATTN_ERR_FORMAT, "\"-4\"");
    attn_st_writer_free(w);
    remove(path);
    expect_refused("missing file", path, m, false, ATTN_ERR_IO, path);
    free_model(m);
    free_model(saved);
    remove(params_only);
}

/* attn_checkpoint_average: p becomes the mean of itself and two files, element by element (sums in
 * double, so the expected values are computed the same way); a file with another shape or lacking
 * a parameter is refused and p stays as it was. */
static void test_average(const char *dir)
{
    char a_path[200], b_path[200], bad_path[200], small_path[200];
    snprintf(a_path, sizeof a_path, "%s/a.safetensors", dir);
    snprintf(b_path, sizeof b_path, "%s/b.safetensors", dir);
    snprintf(bad_path, sizeof bad_path, "%s/bad.safetensors", dir);
    snprintf(small_path, sizeof small_path, "%s/small.safetensors", dir);
    model a = make_model(11, 5, false, false), b = make_model(12, 5, false, false), m = make_model(13, 5, false, false);
    model bad = make_model(14, 6, false, false), big = make_model(15, 5, true, false);
    TK_OK(attn_checkpoint_save(a_path, a.p, NULL, NULL, 0));
    TK_OK(attn_checkpoint_save(b_path, b.p, NULL, NULL, 0));
    TK_OK(attn_checkpoint_save(bad_path, bad.p, NULL, NULL, 0));
    TK_OK(attn_checkpoint_save(small_path, m.p, NULL, NULL, 0));
    int64_t n;
    float *va = snapshot(a, &n), *vb = snapshot(b, &n), *vm = snapshot(m, &n);

    const char *bad_paths[2] = {a_path, bad_path};
    TK_CHECK(attn_checkpoint_average(m.p, bad_paths, 2) != ATTN_OK && strstr(attn_last_error(), "bad.safetensors"),
             "a file with another shape was averaged in, or the refusal does not name it: %s", attn_last_error());
    TK_CHECK(same_as(m, vm, n), "a refused average changed the parameters");
    const char *lacking[1] = {small_path};
    TK_CHECK(attn_checkpoint_average(big.p, lacking, 1) != ATTN_OK && strstr(attn_last_error(), "missing 1: \"extra\""),
             "a file lacking a parameter was averaged in: %s", attn_last_error());

    const char *paths[2] = {a_path, b_path};
    TK_OK(attn_checkpoint_average(m.p, paths, 2));
    float *avg = snapshot(m, &n);
    int wrong = 0;
    for (int64_t i = 0; i < n; i++) wrong += avg[i] != (float)(((double)vm[i] + va[i] + vb[i]) / 3.0);
    TK_CHECK(wrong == 0 && n == 12 + 4 + 5, "%d of %lld averaged values differ from (m + a + b) / 3", wrong,
             (long long)n);
    TK_OK(attn_checkpoint_average(m.p, NULL, 0));
    TK_CHECK(same_as(m, avg, n), "averaging with no file changed the parameters");
    free(va), free(vb), free(vm), free(avg);
    free_model(a), free_model(b), free_model(m), free_model(bad), free_model(big);
    remove(a_path), remove(b_path), remove(bad_path), remove(small_path);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/attn-ckpt-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    char path[160];
    snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
    test_resume(path);
    test_refusals(path, tmpdir);
    test_average(tmpdir);
    remove(path);
    TK_CHECK(rmdir(tmpdir) == 0, "the test left files in %s", tmpdir);
    return tk_finish("test_checkpoint");
}
