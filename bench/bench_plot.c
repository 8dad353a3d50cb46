/* Plot benchmark: renders an L x L attention heatmap (default 512, causal, softmax rows, token
 * labels) to PNG, checks the file came out, and prints the median time of the runs. The issue
 * asks for a 512 x 512 heatmap in under 1 s. Usage: bench_plot [L] [--runs N] [--out FILE.png]
 * (default output: a file in /tmp, left there to look at). */
#include <attn.h>
#include <attn_plot.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Causal attention weights that favour nearby keys and the first token. */
static void fill_weights(float *w, int L)
{
    for (int i = 0; i < L; i++) {
        double sum = 0;
        for (int j = 0; j < L; j++) {
            double v = j <= i ? exp(-fabs((double)(i - j)) / 16.0) + 0.5 * exp(-j / 2.0) : 0.0;
            w[(size_t)i * L + j] = (float)v;
            sum += v;
        }
        for (int j = 0; j < L; j++) w[(size_t)i * L + j] /= (float)sum;
    }
}

int main(int argc, char **argv)
{
    int L = 512, runs = 5;
    const char *out = "/tmp/attn_bench_plot.png";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else
            L = atoi(argv[i]);
    }
    if (L < 1 || runs < 1) {
        fprintf(stderr, "usage: bench_plot [L] [--runs N] [--out FILE.png]\n");
        return 2;
    }
    float *w = malloc(sizeof(float) * (size_t)L * L);
    char *names = malloc((size_t)L * 16);
    const char **labels = malloc(sizeof(char *) * (size_t)L);
    double *t = malloc(sizeof(double) * (size_t)runs);
    if (!w || !names || !labels || !t) {
        fprintf(stderr, "bench_plot: out of memory\n");
        return 1;
    }
    fill_weights(w, L);
    for (int i = 0; i < L; i++) {
        snprintf(names + (size_t)i * 16, 16, "tok%d", i);
        labels[i] = names + (size_t)i * 16;
    }
    attn_heatmap_opts o = {.title = "attention weights", .xticks = labels, .yticks = labels};
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        if (attn_plot_heatmap(out, w, L, L, &o) != ATTN_OK) {
            fprintf(stderr, "bench_plot: %s\n", attn_last_error());
            return 1;
        }
        t[r] = now() - t0;
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    FILE *fp = fopen(out, "rb");
    long size = 0;
    if (fp && fseek(fp, 0, SEEK_END) == 0) size = ftell(fp);
    if (fp) fclose(fp);
    printf("heatmap %d x %d: median %.1f ms of %d runs (min %.1f, max %.1f); %s, %ld "
           "bytes\n",
           L, L, 1e3 * t[runs / 2], runs, 1e3 * t[0], 1e3 * t[runs - 1], out, size);
    free(w);
    free(names);
    free(labels);
    free(t);
    return size > 0 ? 0 : 1;
}
