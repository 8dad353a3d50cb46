/* The test kit's own checks, on made-up data: the scaled golden comparison (testkit.h) takes the
 * float32 error of a computation and rejects the errors the golden tests exist to catch, and the
 * printed-number comparison allows a last digit only near a rounding boundary.
 *   - the element that failed the old bound on an AVX-512 host (s2s_bahdanau,
 *     grad.decoder.rnn.weight_ih_l0[274]: -0.0140404 against the golden -0.0140288, a
 *     cancellation in a tensor whose largest value is 19.6) is within the new bound of that case
 *     (tk_tol_of(1, 2000, 4, 8), test_golden_models.c) and was outside the old one
 *     (1e-5 + 1e-4 |ref|);
 *   - 2e-4 of the tensor's largest value added to one element, anywhere and of either sign, fails
 *     every bound the golden tests use (the largest, n = 3000 with cond 2, included);
 *   - NaN passes only against NaN, an infinity only against itself; an all-zero golden asks for
 *     zeros, and one made of rounding noise takes the scale it is given;
 *   - printed numbers: one unit of the last digit apart only where a value lies within a few ulps
 *     (and its bound) of the boundary between them (epoch 15's w of the NW tutorial, 2.8 ulps
 *     from 2.36355), never two units, never far from the boundary, never for integers. */
#include "testkit.h"

#include <math.h>
#include <string.h>

#define N 16

/* A golden tensor like s2s_bahdanau's: largest value 19.6, one cancelling element. */
static void golden_like(float *ref)
{
    for (int i = 0; i < N; i++) ref[i] = (float)((i % 2 ? -1.0 : 1.0) * (0.5 + 0.7 * i));
    ref[3] = 19.6182f;
    ref[7] = -0.0140287559f;
}

static void test_issue_element(void)
{
    float ref[N], got[N];
    golden_like(ref);
    memcpy(got, ref, sizeof ref);
    got[7] = -0.0140404f; /* the AVX-512 host's value */
    const tk_tol now = tk_tol_of(1, 2000, 4, 8), before = {.rtol = 1e-4, .atol = 1e-5 / 19.6182};
    TK_CHECK(tk_scaled_outside(got, ref, N, now) == 0, "the cancelling element is within the new bound");
    TK_CHECK(tk_scaled_outside(got, ref, N, before) == 1, "and was outside the old one");
}

/* Every bound a golden test uses, with what it stands for. */
static const struct {
    const char *what;
    double sides, n, cond, ulps;
} bounds[] = {
    {"test_golden_ops", 2, 32, 16, 8},
    {"sdpa (TK_TOL_SDPA)", 2, 64, 4, 8},
    {"mha, mechanisms (TK_TOL_MHA, TK_TOL_MECH)", 2, 160, 4, 8},
    {"s2s_bahdanau", 1, 2000, 4, 8},
    {"nw training", 2, 3000, 2, 8},
    {"003/positional", 2, 3, 60, 8},
    {"003/transformer", 2, 700, 4, 8},
};

static void test_planted(void)
{
    float ref[N], got[N];
    golden_like(ref);
    for (size_t b = 0; b < sizeof bounds / sizeof *bounds; b++) {
        const tk_tol tol = tk_tol_of(bounds[b].sides, bounds[b].n, bounds[b].cond, bounds[b].ulps);
        TK_CHECK(tol.rtol + tol.atol < TK_PLANTED, "%s: rtol + atol = %g < %g", bounds[b].what, tol.rtol + tol.atol,
                 TK_PLANTED);
        int missed = 0;
        for (int i = 0; i < N; i++)
            for (int sign = -1; sign <= 1; sign += 2) {
                memcpy(got, ref, sizeof ref);
                got[i] += (float)(sign * TK_PLANTED * 19.6182);
                missed += tk_scaled_outside(got, ref, N, tol) != 1;
            }
        TK_CHECK(missed == 0, "%s: 2e-4 max|ref| planted in one element is caught (missed %d of %d)", bounds[b].what,
                 missed, 2 * N);
        memcpy(got, ref, sizeof ref);
        TK_CHECK(tk_close_scaled(bounds[b].what, got, ref, N, tol), "%s: equal values pass", bounds[b].what);
    }
}

static void test_special_values(void)
{
    const tk_tol tol = tk_tol_of(2, 64, 4, 8);
    float ref[4] = {1.0f, NAN, INFINITY, -2.0f}, got[4] = {1.0f, NAN, INFINITY, -2.0f};
    TK_CHECK(tk_scaled_outside(got, ref, 4, tol) == 0, "NaN against NaN, inf against inf");
    got[1] = 0.0f;
    TK_CHECK(tk_scaled_outside(got, ref, 4, tol) == 1, "a number against NaN fails");
    got[1] = NAN;
    got[2] = 3.0e38f;
    TK_CHECK(tk_scaled_outside(got, ref, 4, tol) == 1, "a finite value against inf fails");
    got[2] = -INFINITY;
    TK_CHECK(tk_scaled_outside(got, ref, 4, tol) == 1, "-inf against inf fails");
    got[2] = INFINITY;
    got[0] = NAN;
    TK_CHECK(tk_scaled_outside(got, ref, 4, tol) == 1, "NaN against a number fails");

    float zeros[3] = {0}, tiny[3] = {0, 1e-30f, 0};
    TK_CHECK(tk_scaled_outside(zeros, zeros, 3, tol) == 0 && tk_scaled_outside(tiny, zeros, 3, tol) == 1,
             "an all-zero golden asks for zeros");
    /* a key bias's gradient: golden and ours rounding noise of terms of size 0.5 */
    float noise_ref[3] = {1.2e-7f, -3.0e-8f, 6.0e-8f}, noise_got[3] = {-2.4e-7f, 0.0f, 1.1e-7f};
    tk_tol zero = TK_TOL_MECH;
    zero.scale = 0.5;
    TK_CHECK(tk_close_scaled("noise on the scale of its terms", noise_got, noise_ref, 3, zero),
             "rounding noise passes on the scale of its terms");
    noise_got[1] = (float)(TK_PLANTED * 0.5);
    TK_CHECK(tk_scaled_outside(noise_got, noise_ref, 3, zero) == 1, "2e-4 of that scale in one element fails");
}

static void test_printed(void)
{
    /* epoch 15 of the NW tutorial: PyTorch's w = 2.363550663 prints 2.3636, 2.8 ulps above the
     * boundary 2.36355; a host 3 ulps lower prints 2.3635 */
    const float w[1] = {2.3635497f};
    const tk_values near = {w, 1, tk_tol_of(2, 150, 2, 8), TK_PRINTED_ULPS};
    TK_CHECK(tk_printed_near_boundary(2.3636, 2.3635, 4, &near, 1),
             "2.3635 for 2.3636 where a value lies at the boundary");
    TK_CHECK(!tk_printed_near_boundary(2.3636, 2.3635, 4, NULL, 0), "not without a value");
    TK_CHECK(!tk_printed_near_boundary(2.3637, 2.3635, 4, &near, 1), "never two units");
    const float far[1] = {2.36361f};
    const tk_values far_set = {far, 1, tk_tol_of(2, 150, 2, 8), TK_PRINTED_ULPS};
    TK_CHECK(!tk_printed_near_boundary(2.3636, 2.3637, 4, &far_set, 1),
             "not where the value lies far from the boundary");
    TK_CHECK(tk_same_text("a line near the boundary", "w = 2.3636\n", "w = 2.3635\n", &near, 1) &&
                 tk_same_text("zero's sign", "x -0.0000\n", "x 0.0000\n", NULL, 0) &&
                 tk_same_text("the same line", "epoch 15, loss = 0.3398\n", "epoch 15, loss = 0.3398\n", NULL, 0),
             "tk_same_text takes those");
    TK_CHECK(!tk_printed_near_boundary(0.3398, 0.3399, 4, &near, 1), "no allowance for a value elsewhere");
    TK_CHECK(!tk_printed_near_boundary(12.0, 13.0, 0, &near, 1), "none for integers");
    /* within its bound (5.5e-5 here) but 200 ulps (4.8e-5) from the boundary: farther than a few */
    const float off[1] = {2.3635023f};
    const tk_values off_set = {off, 1, tk_tol_of(2, 150, 2, 8), TK_PRINTED_ULPS};
    TK_CHECK(!tk_printed_near_boundary(2.3636, 2.3635, 4, &off_set, 1),
             "not 200 ulps from the boundary, though within the computation's bound");
}

int main(void)
{
    test_issue_element();
    test_planted();
    test_special_values();
    test_printed();
    return tk_finish("test_testkit");
}
