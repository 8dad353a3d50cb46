/* The option tables' interpreter: parsing with range checks, --help, the man page, and the
 * checks of paths made before any work (see options.h). */
#include "options.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void *field(void *opts, const cli_option *o)
{
    return (char *)opts + o->offset;
}

static bool is_integer(cli_opt_type t)
{
    return t == CLI_LONG || t == CLI_INT64 || t == CLI_INT;
}

/* "a, b or c" */
const char *const cli_precision_names[] = {"highest", "high", "medium", NULL};

static void choices_text(char *buf, size_t len, const char *const *choices, const char *last_sep)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; choices[i] && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i == 0 ? "" : choices[i + 1] ? ", " : last_sep, choices[i]);
}

/* Stores text as o's value in opts; false with a message naming the option. */
static bool set_value(const char *cmd, const cli_option *o, void *opts, const char *text)
{
    void *dst = field(opts, o);
    if (o->type == CLI_NAME && !*text) {
        cli_fail(CLI_ERR_USAGE, cmd, "%s is empty; expected %s", o->name, o->value);
        return false;
    }
    if (o->type == CLI_TEXT || o->type == CLI_NAME || cli_opt_is_path(o->type)) {
        *(const char **)dst = text;
        return true;
    }
    if (o->type == CLI_CHOICE) {
        for (int i = 0; o->choices[i]; i++)
            if (!strcmp(text, o->choices[i])) {
                *(int *)dst = i;
                return true;
            }
        char list[256];
        choices_text(list, sizeof list, o->choices, " or ");
        cli_fail(CLI_ERR_USAGE, cmd, "%s expects %s, got \"%s\"", o->name, list, text);
        return false;
    }
    if (is_integer(o->type)) {
        errno = 0;
        long long v = strtoll(text, NULL, 10);
        if (!cli_integer_form(text) || errno) {
            cli_fail(CLI_ERR_USAGE, cmd, "%s expects an integer, got \"%s\"", o->name, text);
            return false;
        }
        if ((double)v < o->min || (double)v > o->max) {
            cli_fail(CLI_ERR_USAGE, cmd, "%s must be in [%.0f, %.0f], got %lld", o->name, o->min, o->max, v);
            return false;
        }
        if (o->type == CLI_LONG)
            *(long *)dst = (long)v;
        else if (o->type == CLI_INT64)
            *(int64_t *)dst = (int64_t)v;
        else
            *(int *)dst = (int)v;
        return true;
    }
    char *end;
    double v = strtod(text, &end); /* an underflow (ERANGE, v tiny) is left to the range check */
    if (end == text || *end || !isfinite(v)) {
        cli_fail(CLI_ERR_USAGE, cmd, "%s expects a finite number, got \"%s\"", o->name, text);
        return false;
    }
    /* a float option's range holds for the float it stores (FLT_MAX's 9 digits round to it), and
     * says its bounds in digits that give them back */
    const bool single = o->type != CLI_DOUBLE;
    const double rounds_to_max = FLT_MAX + ldexp(1.0, 103); /* FLT_MAX + half its ulp: the float overflows */
    const double stored = single && fabs(v) < rounds_to_max ? (double)(float)v : v;
    if (stored < o->min || stored > o->max) {
        cli_fail(CLI_ERR_USAGE, cmd, single ? "%s must be in [%.9g, %.9g], got %.9g" : "%s must be in [%g, %g], got %g",
                 o->name, o->min, o->max, stored);
        return false;
    }
    const double tiny = o->type == CLI_DOUBLE ? DBL_MIN : FLT_MIN, huge = o->type == CLI_DOUBLE ? DBL_MAX : FLT_MAX;
    if (stored != 0.0 &&
        (fabs(stored) < tiny || fabs(stored) > huge)) { /* a denormal or an overflow where it is stored */
        cli_fail(CLI_ERR_USAGE, cmd, "%s %s: %s, whose normal numbers run from %g to %g (and 0)", o->name, text,
                 o->type == CLI_DOUBLE ? "not a double" : "not a float32 number", tiny, huge);
        return false;
    }
    if (o->type == CLI_DOUBLE)
        *(double *)dst = v;
    else
        *(float *)dst = (float)v;
    return true;
}

static const cli_option *find(const cli_spec *spec, const char *name)
{
    for (size_t i = 0; i < spec->n_options; i++)
        if (spec->options[i].name && !strcmp(spec->options[i].name, name)) return &spec->options[i];
    return NULL;
}

/* true when `word` is one of the space-separated words of `words` */
bool cli_opt_is_path(cli_opt_type t)
{
    return t == CLI_IN_FILE || t == CLI_IN_FILES || t == CLI_IN_DIR || t == CLI_OUT_FILE || t == CLI_PICTURE ||
           t == CLI_OUT_DIR || t == CLI_CHECKPOINT;
}

bool cli_option_applies(const cli_option *o, const char *action)
{
    if (!o->only || !action) return true;
    const size_t n = strlen(action);
    for (const char *w = o->only; *w; w += strcspn(w, " "), w += strspn(w, " "))
        if (strcspn(w, " ") == n && !strncmp(w, action, n)) return true;
    return false;
}

int cli_parse(const cli_spec *spec, void *opts, int argc, char **argv, int first, const char **args, int *n_args)
{
    for (size_t i = 0; i < spec->n_options; i++) {
        const cli_option *o = &spec->options[i];
        if (o->name && o->def && !set_value(spec->cmd, o, opts, o->def)) return CLI_ERR_USAGE; /* a table bug */
    }
    if (n_args) *n_args = 0;
    bool options_end = false;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (!options_end && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            cli_help(spec, stdout);
            return CLI_HELP_SHOWN;
        }
        if (!options_end && !strcmp(a, "--")) {
            options_end = true;
            continue;
        }
        if (options_end || a[0] != '-' || !a[1]) {
            if (!args)
                return cli_fail(CLI_ERR_USAGE, spec->cmd, "unexpected argument \"%s\" (see attn %s --help)", a,
                                spec->cmd);
            args[(*n_args)++] = a;
            continue;
        }
        const cli_option *o = find(spec, a);
        if (!o) return cli_fail(CLI_ERR_USAGE, spec->cmd, "unknown option \"%s\" (see attn %s --help)", a, spec->cmd);
        if (first >= 2 && !cli_option_applies(o, argv[first - 1])) {
            char actions[128]; /* "train and eval" */
            size_t n = 0, words = 0, len = strlen(o->only);
            for (const char *w = o->only; *w && n < sizeof actions;
                 w += strcspn(w, " "), w += strspn(w, " "), words++) {
                const char *sep = !words ? "" : w + strcspn(w, " ") == o->only + len ? " and " : ", ";
                n += (size_t)snprintf(actions + n, sizeof actions - n, "%s%.*s", sep, (int)strcspn(w, " "), w);
            }
            return cli_fail(CLI_ERR_USAGE, spec->cmd, "%s applies to %s only, not to %s", a, actions, argv[first - 1]);
        }
        if (o->type == CLI_FLAG) {
            *(bool *)field(opts, o) = true;
            continue;
        }
        if (i + 1 >= argc) return cli_fail(CLI_ERR_USAGE, spec->cmd, "option %s needs a value", a);
        if ((o->type == CLI_TEXT || o->type == CLI_NAME || cli_opt_is_path(o->type)) &&
            find(spec, argv[i + 1])) /* "--checkpoint --resume" */
            return cli_fail(CLI_ERR_USAGE, spec->cmd,
                            "option %s needs a value, got the option %s (a file of that name: "
                            "./%s)",
                            a, argv[i + 1], argv[i + 1]);
        if (!set_value(spec->cmd, o, opts, argv[++i])) return CLI_ERR_USAGE;
    }
    return CLI_OK;
}

bool cli_given(const cli_spec *spec, int argc, char **argv, int first, const char *name)
{
    for (int i = first; i < argc; i++) {
        if (!strcmp(argv[i], "--")) return false;
        const cli_option *o = argv[i][0] == '-' ? find(spec, argv[i]) : NULL;
        if (o && !strcmp(o->name, name)) return true;
        if (o && o->type != CLI_FLAG) i++; /* its value */
    }
    return false;
}

/* ---- help and man page ---- */

/* What --help shows after the option's name: its value, or the choices. */
static void value_text(char *buf, size_t len, const cli_option *o)
{
    if (o->type == CLI_CHOICE && !o->value) {
        size_t n = 0;
        buf[0] = '\0';
        for (int i = 0; o->choices[i] && n < len; i++)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "|" : "", o->choices[i]);
    } else {
        snprintf(buf, len, "%s", o->value ? o->value : "");
    }
}

/* text at column 24, wrapped at spaces to stay within 96 columns. */
static void print_wrapped(FILE *out, const char *text)
{
    const int indent = 24, width = 96;
    int col = indent;
    while (*text) {
        size_t word = strcspn(text, " ");
        if (col > indent && col + 1 + (int)word > width) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', out);
            col++;
        }
        fprintf(out, "%.*s", (int)word, text);
        col += (int)word;
        text += word;
        text += strspn(text, " ");
    }
}

bool cli_help_before_action(const cli_spec *spec, int argc, char **argv, int *code)
{
    const bool asked = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
    if (argc >= 2 && !asked) return false;
    cli_help(spec, asked ? stdout : stderr);
    *code = asked ? CLI_OK : CLI_ERR_USAGE;
    return true;
}

void cli_help(const cli_spec *spec, FILE *out)
{
    fprintf(out, "usage: attn %s %s\n\n%s\n", spec->cmd, spec->synopsis, spec->about);
    if (spec->actions) fprintf(out, "\n%s", spec->actions);
    fprintf(out, "\noptions:\n");
    for (size_t i = 0; i < spec->n_options; i++) {
        const cli_option *o = &spec->options[i];
        if (!o->name) {
            fprintf(out, "%s\n", o->help);
            continue;
        }
        char value[160], head[200];
        value_text(value, sizeof value, o);
        snprintf(head, sizeof head, "  %s%s%s", o->name, *value ? " " : "", value);
        if (strlen(head) > 23)
            fprintf(out, "%s\n%-24s", head, "");
        else
            fprintf(out, "%-24s", head);
        char help[512];
        if (o->def)
            snprintf(help, sizeof help, "%s (default %s)", o->help, o->def);
        else
            snprintf(help, sizeof help, "%s", o->help);
        print_wrapped(out, help);
        fputc('\n', out);
    }
    if (spec->notes) fprintf(out, "\n%s", spec->notes);
}

/* s with roff's special characters escaped: \ and -, and a leading . or ' on a line. */
void cli_roff(FILE *out, const char *s)
{
    bool line_start = true;
    for (; *s; s++) {
        if (line_start && (*s == '.' || *s == '\'')) fputs("\\&", out);
        if (*s == '\\')
            fputs("\\e", out);
        else if (*s == '-')
            fputs("\\-", out);
        else
            fputc(*s, out);
        line_start = *s == '\n';
    }
}

/* Text made of "  name  description" lines (spec->actions) as roff tagged paragraphs. */
static void roff_actions(FILE *out, const char *text)
{
    const char *line = text;
    while (*line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        char *name = buf + strspn(buf, " ");
        char *gap = strstr(name, "  ");
        if (name == buf + 2 && gap) { /* "  name   what it does" */
            *gap = '\0';
            fputs(".TP\n.B ", out);
            cli_roff(out, name);
            fputc('\n', out);
            cli_roff(out, gap + 1 + strspn(gap + 1, " "));
        } else { /* a continuation line */
            cli_roff(out, name);
        }
        fputc('\n', out);
        line += len + (end ? 1 : 0);
    }
}

void cli_man(const cli_spec *spec, FILE *out)
{
    fprintf(out, ".SS \"attn %s\"\n.B attn %s\n", spec->cmd, spec->cmd);
    cli_roff(out, spec->synopsis);
    fputs("\n.PP\n", out);
    cli_roff(out, spec->about);
    fputc('\n', out);
    if (spec->actions) roff_actions(out, spec->actions);
    for (size_t i = 0; i < spec->n_options; i++) {
        const cli_option *o = &spec->options[i];
        if (!o->name) {
            fputs(".PP\n", out);
            cli_roff(out, o->help);
            fputc('\n', out);
            continue;
        }
        char value[160];
        value_text(value, sizeof value, o);
        fputs(*value ? ".TP\n.BI \"" : ".TP\n.B \"", out); /* name bold, value italic */
        cli_roff(out, o->name);
        fputc('"', out);
        if (*value) {
            fputs(" \" ", out);
            cli_roff(out, value);
            fputc('"', out);
        }
        fputc('\n', out);
        cli_roff(out, o->help);
        if (o->def) {
            fputs(" (default ", out);
            cli_roff(out, o->def);
            fputc(')', out);
        }
        fputc('\n', out);
    }
    if (spec->notes) {
        fputs(".PP\n", out);
        cli_roff(out, spec->notes);
        fputc('\n', out);
    }
}

int cli_expand_recipe(const char *cmd, const char *const *names, const char *const *options, int argc, char **argv,
                      int *expanded_argc, char ***expanded, char **words)
{
    int recipe = 0; /* the recipes apply to train only */
    for (int i = 2; argc > 1 && !strcmp(argv[1], "train") && i + 1 < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--recipe"))
            for (int r = 0; names[r]; r++) recipe = !strcmp(argv[i + 1], names[r]) ? r : recipe;
    const char *text = options[recipe];
    int n = 0;
    for (const char *c = text; *c; c++) n += *c != ' ' && (c == text || c[-1] == ' ');
    *words = strdup(text);
    *expanded = malloc((size_t)(argc + n + 1) * sizeof **expanded);
    if (!*words || !*expanded) return cli_fail(CLI_ERR_DATA, cmd, "out of memory");
    char **out = *expanded, *save = NULL;
    int k = 0;
    for (; k < argc && k < 2; k++) out[k] = argv[k];
    for (char *w = strtok_r(*words, " ", &save); w; w = strtok_r(NULL, " ", &save)) out[k++] = w;
    for (int i = 2; i < argc; i++) out[k++] = argv[i];
    out[k] = NULL;
    *expanded_argc = k;
    return CLI_OK;
}
