// The library from C++: the same attn.h (extern "C"), owners that free what the library
// allocates, and checked errors. Masked scaled dot-product attention over a padded batch, its
// backward, and one refusal; exits 1 if a value is not the one the math gives.
// Build: c++ -std=c++11 cxx_consumer.cpp $(pkg-config --cflags --libs attn)
#include <attn.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

struct ctx_free {
    void operator()(attn_ctx *c) const { attn_ctx_free(c); }
};
using ctx_ptr = std::unique_ptr<attn_ctx, ctx_free>;

static bool near(float a, float b) { return std::fabs(a - b) <= 1e-6f; }

int main()
{
    ctx_ptr ctx(attn_ctx_new(1));
    const int64_t B = 2, L = 3, D = 2;
    const int64_t shape[3] = {B, L, D}; // (B, L, D): one head
    attn_tensor *q = attn_tensor_zeros(ctx.get(), 3, shape); // equal scores: uniform weights
    attn_tensor *k = attn_tensor_zeros(ctx.get(), 3, shape);
    attn_tensor *v = attn_tensor_empty(ctx.get(), 3, shape);
    if (!q || !k || !v) return std::fprintf(stderr, "%s\n", attn_last_error()), 1;
    for (int64_t i = 0; i < B * L * D; i++) v->data[i] = static_cast<float>(i);
    attn_tensor_set_requires_grad(v, true);

    std::vector<uint8_t> padding(B * L, 0); // key_padding_mask (B, L): true = padding
    padding[1 * L + 2] = 1;                 // the second sequence has 2 keys
    attn_sdpa_opts opts = {};
    opts.mask.key_padding = padding.data();
    opts.mask.key_padding_shape[0] = B;
    opts.mask.key_padding_shape[1] = L;
    attn_tensor *out = attn_sdpa(ctx.get(), q, k, v, &opts, nullptr); // (B, L, D)
    attn_tensor *loss = out ? attn_sum_all(ctx.get(), out) : nullptr;
    if (!loss || attn_backward(ctx.get(), loss) != ATTN_OK)
        return std::fprintf(stderr, "cxx_consumer: %s\n", attn_last_error()), 1;

    // batch 0: the mean of its three value rows; batch 1: of its first two
    const float mean0 = (0 + 2 + 4) / 3.0f, mean1 = (6 + 8) / 2.0f;
    // d loss / d v = the weight each key gets, summed over the queries: 1 each in batch 0,
    // 1.5 on the two visible keys of batch 1 and 0 on its padding key
    const bool ok = near(out->data[0], mean0) && near(out->data[L * D], mean1) &&
                    near(v->grad[0], 1.0f) && near(v->grad[L * D], 1.5f) &&
                    v->grad[L * D + 2 * D] == 0.0f;

    const int64_t wrong[3] = {B, L + 1, D}; // keys and values of different lengths: refused
    attn_tensor *v_long = attn_tensor_zeros(ctx.get(), 3, wrong);
    const bool refused = v_long && !attn_sdpa(ctx.get(), q, k, v_long, nullptr, nullptr) &&
                         attn_last_status() == ATTN_ERR_SHAPE;
    std::printf("out[0][0] %.4f (expected %.4f), out[1][0] %.4f (expected %.4f)\n", out->data[0], mean0,
                out->data[L * D], mean1);
    std::printf("refused: %s\n", refused ? attn_last_error() : "NO");
    return ok && refused ? 0 : 1;
}
