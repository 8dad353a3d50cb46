/* The attention features op and bench take alike (features.h). */
#include "features.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cli_features_given(const cli_features *f)
{
    return f->window || f->alibi || f->softcap != 0;
}

/* One bound of --window: an integer in [-1, INT64_MAX], the whole text (n bytes of it) */
static bool window_bound(const char *text, size_t n, int64_t *out)
{
    char buf[32];
    if (n == 0 || n >= sizeof buf) return false;
    memcpy(buf, text, n);
    buf[n] = '\0';
    errno = 0;
    const long long v = strtoll(buf, NULL, 10);
    if (!cli_integer_form(buf) || errno || v < -1) return false;
    *out = v;
    return true;
}

int cli_features_check(const char *cmd, cli_features *f)
{
    if (!f->window) return CLI_OK;
    const char *comma = strchr(f->window, ',');
    f->window_parsed = (attn_window){.on = true};
    if (comma && window_bound(f->window, (size_t)(comma - f->window), &f->window_parsed.left) &&
        window_bound(comma + 1, strlen(comma + 1), &f->window_parsed.right))
        return CLI_OK;
    return cli_fail(CLI_ERR_USAGE, cmd,
                    "--window \"%s\": expected LEFT,RIGHT, each an integer from -1 (unbounded) to %lld", f->window,
                    (long long)INT64_MAX);
}

bool cli_features_apply(const cli_features *f, float *slopes, int64_t heads, attn_score_features *out)
{
    out->window = f->window_parsed;
    out->softcap = f->softcap;
    if (!f->alibi) return true;
    if (attn_alibi_slopes(slopes, heads) != ATTN_OK) return false;
    out->alibi_slopes = slopes;
    out->alibi_ndim = 1;
    out->alibi_shape[0] = heads;
    return true;
}

double cli_features_pairs(const cli_features *f, bool causal, int64_t lq, int64_t lk)
{
    const attn_window *w = &f->window_parsed;
    double pairs = 0.0;
    for (int64_t i = 0; i < lq; i++) {
        const int64_t diagonal = i + lk - lq; /* the window's, bottom-right aligned */
        int64_t lo = 0, hi = lk - 1;
        if (w->on && w->left >= 0 && diagonal - w->left > lo) lo = diagonal - w->left;
        if (w->on && w->right >= 0 && diagonal + w->right < hi) hi = diagonal + w->right;
        if (causal && i < hi) hi = i;
        if (hi >= lo) pairs += (double)(hi - lo + 1);
    }
    return pairs;
}

void cli_features_print(const cli_features *f)
{
    if (f->window) printf("  window %s", f->window);
    if (f->alibi) printf("  alibi");
    if (f->softcap > 0.0f) printf("  softcap %g", (double)f->softcap);
}

void cli_features_json(const cli_features *f)
{
    if (f->window)
        printf("\"window\":\"%lld,%lld\"", (long long)f->window_parsed.left, (long long)f->window_parsed.right);
    else
        printf("\"window\":null");
    printf(",\"alibi\":%s,\"softcap\":%g", f->alibi ? "true" : "false", (double)f->softcap);
}
