/* attn nw --data on seed 003's own data (tests/golden/nw_seed003.safetensors, from PyTorch running
 * the tutorial's code in float32) must reproduce PyTorch's loss and w at every epoch within 1e-4
 * relative (the bar), and its test predictions within tk_tol_of(2, 3000, 2, 8): two
 * float32 sides, 20 epochs whose gradient each sums ~150 deep (softmax and weighted sum over 49
 * keys, the sum over 50 queries), cond 2 (squared errors and softmax weights are positive terms):
 * 1e-6 |ref_i| + 1e-4 max|y_hat| (before: 1e-4 absolute + 1e-4 |ref_i|). The same bound caps
 * the loss and w: each epoch's gradient differs by at most ~2 * 8 sqrt(150) u = 1.2e-5 relative
 * and w moves by about a tenth of itself an epoch, 20 epochs: ~2.3e-5 of w, within 1e-4. An error
 * of 2e-4 of a tensor's largest value fails each (checked every time). Also checks that bad
 * options give exit status 2 with a message (integers are [-]digits; --n-train stops where its
 * N^2 memory would not fit) and that an --lr that underflows is taken. */
#include "testkit.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int run(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double max_rel(const float *a, const float *b, int64_t n)
{
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i], r = d < 0 ? -d : d;
        double ref = b[i] < 0 ? -(double)b[i] : b[i];
        if (ref > 0) r /= ref;
        if (r > worst) worst = r;
    }
    return worst;
}

int main(void)
{
    const char *bin = getenv("ATTN_BIN");
    TK_CHECK(bin != NULL, "ATTN_BIN is not set (run through ctest)");
    if (!bin) return tk_finish("test_cli_nw");
    char dir[] = "/tmp/attn_nw_XXXXXX", cmd[1024], out[600];
    TK_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(out, sizeof out, "%s/run.safetensors", dir);
    snprintf(cmd, sizeof cmd,
             "%s nw --data tests/golden/nw_seed003.safetensors --out %s --plot %s/fit.png > %s/log.txt", bin, out, dir,
             dir);
    TK_CHECK(run(cmd) == 0, "attn nw --data failed: %s", cmd);
    attn_st_file *ours = attn_st_open(out), *ref = tk_golden("nw_seed003");
    TK_CHECK(ours != NULL, "output %s: %s", out, attn_last_error());
    if (ours && ref) {
        const char *names[2] = {"losses", "w"};
        for (int i = 0; i < 2; i++) {
            attn_tensor *a = attn_st_load(ours, names[i], NULL), *b = attn_st_load(ref, names[i], NULL);
            TK_CHECK(a && b && a->numel == 20 && b->numel == 20, "%s: 20 epochs on both sides", names[i]);
            if (a && b && a->numel == b->numel) {
                double r = max_rel(a->data, b->data, a->numel);
                printf("%s: max relative difference over 20 epochs %.3g\n", names[i], r);
                tk_close_scaled(names[i], a->data, b->data, a->numel, (tk_tol){.rtol = 1e-4});
            }
            attn_tensor_free(a);
            attn_tensor_free(b);
        }
        attn_tensor *yh = attn_st_load(ours, "y_hat", NULL);
        if (yh) tk_golden_close_scaled(ref, "y_hat", yh->data, yh->numel, tk_tol_of(2, 3000, 2, 8));
        attn_tensor_free(yh);
        char png[640];
        snprintf(png, sizeof png, "%s/fit.png", dir);
        TK_CHECK(access(png, R_OK) == 0, "the fit plot %s was written", png);
    }
    attn_st_close(ours);
    attn_st_close(ref);
    const char *bad[] = {"--epochs 0", "--lr abc", "--bogus", "--n-train ' 3'", "--n-train +3", "--n-train 5001"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s nw %s --plot none 2>/dev/null >/dev/null", bin, bad[i]);
        TK_CHECK(run(cmd) == 2, "attn nw %s must exit 2", bad[i]);
    }
    snprintf(cmd, sizeof cmd, "%s nw --lr 1e-320 --epochs 1 --plot none 2>/dev/null >/dev/null", bin);
    TK_CHECK(run(cmd) == 2, "a learning rate that underflows to a subnormal double is refused: exit 2");
    snprintf(cmd, sizeof cmd, "%s nw --data /nonexistent.safetensors --plot none 2>/dev/null", bin);
    TK_CHECK(run(cmd) == 2, "a missing --data file is a bad option: exit 2 before any work");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    run(cmd);
    return tk_finish("test_cli_nw");
}
