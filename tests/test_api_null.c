/* The API contract: the version (header = library), and the NULL contract (attn.h, "Arguments"): every public function is called
 * with NULL for each of its pointer arguments (the other arguments plausible), under
 * AddressSanitizer in scripts/test.sh's sanitizer suite, and must not crash:
 *   - functions that return attn_status return ATTN_ERR_ARG;
 *   - those that return a pointer return NULL, with ATTN_ERR_ARG recorded;
 *   - those that return a value (count, number, bool) or nothing record ATTN_ERR_ARG;
 *   - *_free and attn_st_close accept NULL and do nothing, as free() does.
 * Then the ops with a valid ctx and one NULL tensor: ATTN_ERR_ARG, except that a NULL from a
 * failed op upstream keeps that op's error (a chain of ops is checked at its end).
 * A last check reads include/attn.h (and attn_data.h, attn_plot.h when this build has those
 * libraries): every ATTN_API function must be called here (or be listed as taking no pointer),
 * so a new function cannot skip the contract. */
#include "testkit.h"

#include <stdlib.h>
#include <string.h>

static const char *called[512]; /* the calls made, as written, for the coverage check */
static int n_called;

static void note(const char *call)
{
    if (n_called < (int)(sizeof called / sizeof called[0])) called[n_called++] = call;
}

#define EXPECT_STATUS(call)                                                                                            \
    do {                                                                                                               \
        note(#call);                                                                                                   \
        attn_clear_error();                                                                                            \
        attn_status s_ = (call);                                                                                       \
        TK_CHECK(s_ == ATTN_ERR_ARG, "%s returns ATTN_ERR_ARG, got \"%s\" (%s)", #call, attn_status_name(s_),          \
                 attn_last_error());                                                                                   \
    } while (0)
#define EXPECT_NULL(call)                                                                                              \
    do {                                                                                                               \
        note(#call);                                                                                                   \
        attn_clear_error();                                                                                            \
        const void *p_ = (const void *)(call);                                                                         \
        TK_CHECK(!p_ && attn_last_status() == ATTN_ERR_ARG, "%s returns NULL with ATTN_ERR_ARG, got %s and \"%s\"",    \
                 #call, p_ ? "a pointer" : "NULL", attn_status_name(attn_last_status()));                              \
    } while (0)
#define EXPECT_RECORDED(call)                                                                                          \
    do {                                                                                                               \
        note(#call);                                                                                                   \
        attn_clear_error();                                                                                            \
        (void)(call);                                                                                                  \
        TK_CHECK(attn_last_status() == ATTN_ERR_ARG, "%s records ATTN_ERR_ARG, got \"%s\"", #call,                     \
                 attn_status_name(attn_last_status()));                                                                \
    } while (0)
#define EXPECT_NOOP(call)                                                                                              \
    do {                                                                                                               \
        note(#call);                                                                                                   \
        attn_clear_error();                                                                                            \
        call;                                                                                                          \
        TK_CHECK(attn_last_status() == ATTN_OK, "%s accepts NULL silently", #call);                                    \
    } while (0)

/* Functions without a pointer argument: nothing to pass NULL to. */
static const char *const no_pointer_arguments[] = {"attn_version",
                                                   "attn_bpe_trainer_new",
                                                   "attn_classifier_bigram_bucket",
                                                   "attn_version_number",
                                                   "attn_last_error",
                                                   "attn_last_status",
                                                   "attn_clear_error",
                                                   "attn_status_name",
                                                   "attn_default_num_threads",
                                                   "attn_gemm_backend",
                                                   "attn_cpu_isa",
                                                   "attn_cpu_isa_supported",
                                                   "attn_cpu_isa_set_max",
                                                   "attn_isa_name",
                                                   "attn_isa_this_arch",
                                                   "attn_bf16_products",
                                                   "attn_bf16_attention",
                                                   "attn_bf16_amx",
                                                   "attn_precision_name",
                                                   "attn_ctx_new",
                                                   "attn_params_new",
                                                   "attn_classifier_defaults",
                                                   "attn_optim_defaults",
                                                   "attn_tokenizer_name",
                                                   "attn_counter_new",
                                                   "attn_dtype_name",
                                                   "attn_dtype_size",
                                                   "attn_st_writer_new"};

/* Every pointer argument NULL at once. */
static void all_null(void)
{
    EXPECT_STATUS(attn_rng_seed(NULL, 1));
    EXPECT_RECORDED(attn_rng_u32(NULL));
    EXPECT_RECORDED(attn_rng_below(NULL, 1));
    EXPECT_RECORDED(attn_rng_uniform(NULL));
    EXPECT_RECORDED(attn_rng_normal(NULL));
    EXPECT_RECORDED(attn_rng_bernoulli(NULL, 1.0f));
    EXPECT_STATUS(attn_rng_shuffle(NULL, NULL, 1));
    EXPECT_NULL(attn_tensor_empty(NULL, 1, NULL));
    EXPECT_NULL(attn_tensor_zeros(NULL, 1, NULL));
    EXPECT_NULL(attn_tensor_from(NULL, 1, NULL, NULL));
    EXPECT_NULL(attn_tensor_alloc(1, NULL));
    EXPECT_NOOP(attn_tensor_free(NULL));
    EXPECT_STATUS(attn_tensor_set_requires_grad(NULL, false));
    EXPECT_RECORDED(attn_tensor_zero_grad(NULL));
    EXPECT_STATUS(attn_tensor_fill_normal(NULL, NULL, 1.0f, 1.0f));
    EXPECT_STATUS(attn_tensor_check_finite(NULL, "q"));
    EXPECT_STATUS(attn_tensor_fill_uniform(NULL, NULL, 1.0f, 1.0f));
    EXPECT_NULL(attn_shape_str(NULL, NULL, 1));
    EXPECT_RECORDED(attn_same_shape(NULL, NULL));
    EXPECT_NOOP(attn_ctx_free(NULL));
    EXPECT_RECORDED(attn_ctx_reset(NULL));
    EXPECT_STATUS(attn_ctx_set_grad_enabled(NULL, false));
    EXPECT_RECORDED(attn_ctx_grad_enabled(NULL));
    EXPECT_STATUS(attn_ctx_set_training(NULL, false));
    EXPECT_RECORDED(attn_ctx_training(NULL));
    EXPECT_NULL(attn_ctx_rng(NULL));
    EXPECT_RECORDED(attn_ctx_bytes_used(NULL));
    EXPECT_RECORDED(attn_ctx_bytes_peak(NULL));
    EXPECT_STATUS(attn_ctx_set_num_threads(NULL, 1));
    attn_isa level;
    EXPECT_STATUS(attn_isa_from_name(NULL, &level));
    EXPECT_STATUS(attn_isa_from_name("avx2", NULL));
    EXPECT_STATUS(attn_ctx_set_matmul_precision(NULL, ATTN_PRECISION_MEDIUM));
    EXPECT_RECORDED(attn_ctx_matmul_precision(NULL));
    attn_precision precision;
    EXPECT_STATUS(attn_precision_from_name(NULL, &precision));
    EXPECT_STATUS(attn_precision_from_name("medium", NULL));
    EXPECT_STATUS(attn_alibi_slopes(NULL, 8));
    EXPECT_RECORDED(attn_ctx_num_threads(NULL));
    EXPECT_STATUS(attn_backward(NULL, NULL));
    EXPECT_STATUS(attn_backward_from(NULL, NULL, NULL));
    EXPECT_NOOP(attn_params_free(NULL));
    EXPECT_NULL(attn_params_add(NULL, NULL, 1, NULL));
    EXPECT_STATUS(attn_params_set_max_numel(NULL, 1));
    EXPECT_NULL(attn_params_get(NULL, NULL));
    EXPECT_RECORDED(attn_params_count(NULL));
    EXPECT_NULL(attn_params_at(NULL, 1));
    EXPECT_NULL(attn_params_name(NULL, 1));
    EXPECT_RECORDED(attn_params_numel(NULL));
    EXPECT_STATUS(attn_params_pack(NULL));
    EXPECT_NULL(attn_params_grad_block(NULL));
    EXPECT_NULL(attn_params_data_block(NULL));
    EXPECT_RECORDED(attn_params_zero_grad(NULL));
    EXPECT_NULL(attn_matmul(NULL, NULL, NULL, false, false));
    EXPECT_NULL(attn_add(NULL, NULL, NULL));
    EXPECT_NULL(attn_sub(NULL, NULL, NULL));
    EXPECT_NULL(attn_mul(NULL, NULL, NULL));
    EXPECT_NULL(attn_div(NULL, NULL, NULL));
    EXPECT_NULL(attn_scale(NULL, NULL, 1.0f));
    EXPECT_NULL(attn_bias_add(NULL, NULL, NULL));
    EXPECT_NULL(attn_relu(NULL, NULL));
    EXPECT_NULL(attn_gelu(NULL, NULL));
    EXPECT_NULL(attn_gelu_tanh(NULL, NULL));
    EXPECT_NULL(attn_silu(NULL, NULL));
    EXPECT_NULL(attn_tanh(NULL, NULL));
    EXPECT_NULL(attn_sigmoid(NULL, NULL));
    EXPECT_NULL(attn_exp(NULL, NULL));
    EXPECT_NULL(attn_softmax(NULL, NULL, 1));
    EXPECT_NULL(attn_log_softmax(NULL, NULL, 1));
    EXPECT_NULL(attn_layer_norm(NULL, NULL, NULL, NULL, 1.0f));
    EXPECT_NULL(attn_rms_norm(NULL, NULL, NULL, 1.0f));
    EXPECT_NULL(attn_dropout(NULL, NULL, 1.0f));
    EXPECT_NULL(attn_embedding(NULL, NULL, NULL, 1, NULL, 1));
    EXPECT_NULL(attn_linear(NULL, NULL, NULL, NULL));
    EXPECT_NULL(attn_conv1d(NULL, NULL, NULL, NULL, 1));
    EXPECT_NULL(attn_sum(NULL, NULL, 1, false));
    EXPECT_NULL(attn_mean(NULL, NULL, 1, false));
    EXPECT_NULL(attn_sum_all(NULL, NULL));
    EXPECT_NULL(attn_mean_all(NULL, NULL));
    EXPECT_NULL(attn_reshape(NULL, NULL, 1, NULL));
    EXPECT_NULL(attn_transpose(NULL, NULL, 1, 1));
    EXPECT_NULL(attn_permute(NULL, NULL, NULL));
    EXPECT_NULL(attn_concat(NULL, NULL, 1, 1));
    EXPECT_STATUS(attn_split(NULL, NULL, 1, NULL, 1, NULL));
    EXPECT_NULL(attn_narrow(NULL, NULL, 1, 1, 1));
    EXPECT_NULL(attn_split_heads(NULL, NULL, 1));
    EXPECT_NULL(attn_merge_heads(NULL, NULL));
    EXPECT_NULL(attn_cross_entropy(NULL, NULL, NULL, 1, 1.0f));
    EXPECT_NULL(attn_mse_loss(NULL, NULL, NULL));
    EXPECT_NULL(attn_sdpa(NULL, NULL, NULL, NULL, NULL, NULL));
    EXPECT_NULL(attn_sdpa_varlen(NULL, NULL, NULL, NULL, NULL, NULL, 1, NULL));
    EXPECT_STATUS(attn_linear_init(NULL, NULL, NULL, 1, 1, false, NULL));
    EXPECT_NULL(attn_linear_forward(NULL, NULL, NULL));
    EXPECT_STATUS(attn_embedding_init(NULL, NULL, NULL, 1, 1, 1, NULL));
    EXPECT_NULL(attn_embedding_forward(NULL, NULL, NULL, 1, NULL));
    EXPECT_STATUS(attn_layer_norm_init(NULL, NULL, NULL, 1, 1.0f));
    EXPECT_NULL(attn_layer_norm_forward(NULL, NULL, NULL));
    EXPECT_STATUS(attn_conv1d_init(NULL, NULL, NULL, 1, 1, 1, 1, false, NULL));
    EXPECT_NULL(attn_conv1d_forward(NULL, NULL, NULL));
    EXPECT_STATUS(attn_mha_init(NULL, NULL, NULL, 1, 1, 1, 1, false, 1.0f, NULL));
    EXPECT_STATUS(attn_mha_init_gqa(NULL, NULL, NULL, 1, 1, 1, 1, 1, false, 1.0f, NULL));
    EXPECT_NULL(attn_mha_forward(NULL, NULL, NULL, NULL, NULL, NULL, NULL));
    EXPECT_NULL(attn_mha_forward_packed(NULL, NULL, NULL, NULL, 1, false));
    EXPECT_NULL(attn_mha_forward_packed_cross(NULL, NULL, NULL, NULL, NULL, NULL, 1));
    EXPECT_NULL(attn_encoder_layer_forward_packed(NULL, NULL, NULL, NULL, 1));
    EXPECT_NULL(attn_decoder_layer_forward_packed(NULL, NULL, NULL, NULL, NULL, NULL, 1));
    EXPECT_NULL(attn_masked_softmax(NULL, NULL, NULL));
    EXPECT_NULL(attn_additive_scores(NULL, NULL, NULL, NULL));
    EXPECT_STATUS(attn_additive_init(NULL, NULL, NULL, 1, 1, 1, 1.0f, NULL));
    EXPECT_NULL(attn_additive_forward(NULL, NULL, NULL, NULL, NULL, NULL, NULL));
    EXPECT_NULL(attn_nw_forward(NULL, NULL, NULL, NULL, NULL, NULL));
    EXPECT_NULL(attn_nw_leave_one_out(NULL, NULL));
    EXPECT_STATUS(attn_linear_attention_init(NULL, NULL, NULL, 1, (attn_linear_attention_kind)0, NULL));
    EXPECT_NULL(attn_linear_attention_forward(NULL, NULL, NULL, NULL));
    EXPECT_STATUS(attn_conv_attention_init(NULL, NULL, NULL, 1, 1, 1, NULL));
    EXPECT_NULL(attn_conv_attention_forward(NULL, NULL, NULL, NULL, NULL));
    EXPECT_STATUS(attn_gru_init(NULL, NULL, NULL, 1, 1, 1, 1.0f, NULL));
    EXPECT_NULL(attn_gru_forward(NULL, NULL, NULL, NULL, NULL));
    EXPECT_NULL(attn_sinusoidal_table(NULL, 1, 1, (attn_pe_layout)0));
    EXPECT_NULL(attn_add_positions(NULL, NULL, NULL));
    EXPECT_STATUS(attn_learned_pe_init(NULL, NULL, NULL, 1, 1, NULL));
    EXPECT_NULL(attn_learned_pe_forward(NULL, NULL, NULL));
    EXPECT_STATUS(attn_encoder_layer_init(NULL, NULL, NULL, NULL, NULL));
    EXPECT_NULL(attn_encoder_layer_forward(NULL, NULL, NULL, NULL, NULL));
    EXPECT_STATUS(attn_decoder_layer_init(NULL, NULL, NULL, NULL, NULL));
    EXPECT_NULL(attn_decoder_layer_forward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL));
    EXPECT_STATUS(attn_classifier_init(NULL, NULL, NULL, NULL));
    EXPECT_NOOP(attn_classifier_free(NULL));
    EXPECT_NULL(attn_classifier_forward(NULL, NULL, NULL, NULL, 1, 1, NULL));
    EXPECT_RECORDED(attn_lm_ffn_hidden(NULL));
    EXPECT_STATUS(attn_lm_init(NULL, NULL, NULL, NULL));
    EXPECT_NOOP(attn_lm_free(NULL));
    EXPECT_NULL(attn_lm_forward(NULL, NULL, NULL, NULL, 1));
    EXPECT_NULL(attn_lm_forward_weights(NULL, NULL, NULL, 1, NULL));
    EXPECT_NULL(attn_lm_decoder_new(NULL, 1, 1));
    EXPECT_STATUS(attn_lm_decoder_feed(NULL, NULL, NULL, NULL));
    EXPECT_RECORDED(attn_lm_decoder_length(NULL, 0));
    EXPECT_STATUS(attn_lm_decoder_set_num_threads(NULL, 1));
    EXPECT_NOOP(attn_lm_decoder_free(NULL));
    EXPECT_STATUS(attn_lm_save_llama2c(NULL, NULL, 0, NULL));
    EXPECT_STATUS(attn_lm_load_llama2c(NULL, NULL, NULL, NULL));
    EXPECT_STATUS(attn_lm_save_llmc(NULL, NULL));
    EXPECT_STATUS(attn_lm_save_hf(NULL, NULL));
    EXPECT_STATUS(attn_lm_load_hf(NULL, NULL, NULL));
    EXPECT_STATUS(attn_lm_load_llmc(NULL, NULL, NULL));
    EXPECT_STATUS(attn_lm_save_llmc_state(NULL, NULL, NULL, NULL, 1, 1, NULL, 0.0f));
    EXPECT_STATUS(attn_seq2seq_init(NULL, NULL, NULL, NULL));
    EXPECT_NOOP(attn_seq2seq_free(NULL));
    EXPECT_NULL(attn_seq2seq_forward(NULL, NULL, NULL, NULL, 1, 1, NULL, NULL, 1, NULL));
    EXPECT_NULL(attn_seq2seq_forward_packed(NULL, NULL, NULL, NULL, NULL, NULL, 1));
    EXPECT_STATUS(attn_seq2seq_decode(NULL, NULL, NULL, NULL, 1, 1, NULL, 1, NULL, NULL));
    EXPECT_NULL(attn_seq2seq_decoder_new(NULL, NULL, NULL, 1, 1, 1, 1, ATTN_SEQ2SEQ_DECODE_CACHED));
    EXPECT_STATUS(attn_seq2seq_decoder_step(NULL, NULL, NULL));
    EXPECT_STATUS(attn_seq2seq_decoder_reorder(NULL, NULL));
    EXPECT_STATUS(attn_seq2seq_decoder_select(NULL, NULL, 1));
    EXPECT_STATUS(attn_seq2seq_decoder_set_num_threads(NULL, 1));
    EXPECT_NOOP(attn_seq2seq_decoder_free(NULL));
    EXPECT_NULL(attn_optim_new(NULL, NULL));
    EXPECT_NOOP(attn_optim_free(NULL));
    EXPECT_STATUS(attn_optim_step(NULL));
    EXPECT_STATUS(attn_optim_set_num_threads(NULL, 1));
    EXPECT_STATUS(attn_optim_set_lr(NULL, 1.0f));
    EXPECT_RECORDED(attn_optim_lr(NULL));
    EXPECT_RECORDED(attn_optim_step_count(NULL));
    EXPECT_RECORDED(attn_optim_state_count(NULL));
    EXPECT_STATUS(attn_optim_state_at(NULL, 1, NULL, NULL, NULL));
    EXPECT_STATUS(attn_optim_set_step_count(NULL, 1));
    EXPECT_RECORDED(attn_clip_grad_norm(NULL, 1.0f));
    EXPECT_RECORDED(attn_lr_at(NULL, 1));
    EXPECT_STATUS(attn_output_check(NULL));
#ifdef ATTN_TEST_DATA
    EXPECT_STATUS(attn_utf8_check(NULL, 1, NULL));
    EXPECT_NULL(attn_utf8_lower(NULL, 1));
    EXPECT_STATUS(attn_tokens_push(NULL, NULL, 1));
    EXPECT_RECORDED(attn_tokens_clear(NULL));
    EXPECT_NOOP(attn_tokens_free(NULL));
    EXPECT_STATUS(attn_tokenizer_parse(NULL, NULL));
    EXPECT_STATUS(attn_tokenize(NULL, (attn_tokenizer)0, NULL, 1));
    EXPECT_NULL(attn_detokenize(NULL, 1));
    EXPECT_NOOP(attn_counter_free(NULL));
    EXPECT_STATUS(attn_counter_add(NULL, NULL, 1));
    EXPECT_RECORDED(attn_counter_get(NULL, NULL));
    EXPECT_RECORDED(attn_counter_distinct(NULL));
    EXPECT_RECORDED(attn_counter_total(NULL));
    EXPECT_NULL(attn_vocab_build(NULL, NULL, 1, 1, 1));
    EXPECT_NULL(attn_vocab_from_tokens(NULL, 1));
    EXPECT_NOOP(attn_vocab_free(NULL));
    EXPECT_STATUS(attn_vocab_save(NULL, NULL));
    EXPECT_NULL(attn_vocab_load(NULL));
    EXPECT_NULL(attn_vocab_text(NULL, NULL));
    EXPECT_NULL(attn_vocab_parse(NULL, 1, NULL));
    EXPECT_RECORDED(attn_vocab_size(NULL));
    EXPECT_NULL(attn_vocab_token(NULL, 1));
    EXPECT_RECORDED(attn_vocab_find(NULL, NULL));
    EXPECT_RECORDED(attn_vocab_id(NULL, NULL));
    EXPECT_RECORDED(attn_vocab_unk(NULL));
    EXPECT_STATUS(attn_vocab_set_unk(NULL, 1));
    EXPECT_STATUS(attn_vocab_encode(NULL, NULL, NULL, 1));
    EXPECT_STATUS(attn_id_seqs_push(NULL, NULL, 1));
    EXPECT_RECORDED(attn_id_seqs_len(NULL, 1));
    EXPECT_NOOP(attn_id_seqs_free(NULL));
    EXPECT_STATUS(attn_encode_texts(NULL, NULL, (attn_tokenizer)0, NULL, 1));
    EXPECT_RECORDED(attn_pad_ids(NULL, NULL, 1, NULL, 1));
    EXPECT_STATUS(attn_batch_pad(NULL, NULL, NULL, NULL, NULL, 1, 1));
    EXPECT_RECORDED(attn_batch_width(NULL, NULL, 1, 1, 1));
    EXPECT_STATUS(attn_batches_plain(NULL, 1, 1, NULL));
    EXPECT_STATUS(attn_batches_bucketed(NULL, NULL, NULL, 1, 1, NULL));
    EXPECT_NOOP(attn_batches_free(NULL));
    EXPECT_STATUS(attn_imdb_load(NULL, NULL, NULL));
    EXPECT_NOOP(attn_labeled_texts_free(NULL));
    EXPECT_STATUS(attn_pairs_load(NULL, NULL, NULL));
    EXPECT_STATUS(attn_pairs_load_tsv(NULL, NULL));
    EXPECT_NOOP(attn_text_pairs_free(NULL));
    EXPECT_STATUS(attn_bleu_add_tokens(NULL, NULL, 1, NULL, 1));
    EXPECT_STATUS(attn_bleu_add(NULL, NULL, NULL));
    EXPECT_RECORDED(attn_bleu_score(NULL, NULL, NULL));
    EXPECT_RECORDED(attn_bleu_d2l(NULL, 1, NULL, 1, 1));
    EXPECT_STATUS(attn_bpe_trainer_add(NULL, NULL, 0));
    EXPECT_NULL(attn_bpe_trainer_finish(NULL, 300));
    EXPECT_NOOP(attn_bpe_trainer_free(NULL));
    EXPECT_NULL(attn_bpe_from_merges(NULL, 1));
    EXPECT_NOOP(attn_bpe_free(NULL));
    EXPECT_NULL(attn_bpe_merges(NULL, NULL));
    EXPECT_RECORDED(attn_bpe_vocab_size(NULL));
    EXPECT_RECORDED(attn_bpe_eot(NULL));
    EXPECT_RECORDED(attn_bpe_encode(NULL, NULL, 1, NULL));
    EXPECT_RECORDED(attn_bpe_decode(NULL, NULL, 1, NULL, 1));
    EXPECT_NULL(attn_bpe_token_bytes(NULL, 0, NULL));
    EXPECT_RECORDED(attn_bpe_pieces(NULL, 1, NULL));
    EXPECT_STATUS(attn_bpe_llama2c_order(NULL, NULL));
    EXPECT_STATUS(attn_bpe_save_llama2c(NULL, NULL));
    EXPECT_STATUS(attn_bpe_save_llmc(NULL, NULL));
    EXPECT_NULL(attn_llama2c_vocab_read(NULL, 0, 300, NULL));
    EXPECT_NULL(attn_llama2c_vocab_load(NULL, 300));
    EXPECT_NOOP(attn_llama2c_vocab_free(NULL));
    EXPECT_RECORDED(attn_llama2c_vocab_size(NULL));
    EXPECT_NULL(attn_llama2c_vocab_bytes(NULL, NULL));
    EXPECT_STATUS(attn_llama2c_vocab_save(NULL, NULL));
    EXPECT_RECORDED(attn_llama2c_encode(NULL, NULL, 1, false, NULL));
    EXPECT_NULL(attn_llama2c_piece(NULL, 0, 0, NULL));
#endif
#ifdef ATTN_TEST_PLOT
    EXPECT_STATUS(attn_plot_path_check(NULL));
    EXPECT_STATUS(attn_plot_heatmap(NULL, NULL, 1, 1, NULL));
    EXPECT_STATUS(attn_plot_heatmap_grid(NULL, NULL, 1, 1, 1, 1, NULL, NULL));
    EXPECT_STATUS(attn_plot_heatmap_heads(NULL, NULL, 1, 1, 1, NULL, NULL));
    EXPECT_STATUS(attn_plot_lines(NULL, NULL, 1, NULL));
#endif
    EXPECT_NULL(attn_st_open(NULL));
    EXPECT_NULL(attn_st_parse(NULL, 1, NULL));
    EXPECT_NOOP(attn_st_close(NULL));
    EXPECT_RECORDED(attn_st_count(NULL));
    EXPECT_NULL(attn_st_at(NULL, 1));
    EXPECT_NULL(attn_st_find(NULL, NULL));
    EXPECT_NULL(attn_st_metadata(NULL, NULL));
    EXPECT_NULL(attn_st_load(NULL, NULL, NULL));
    EXPECT_NULL(attn_st_view(NULL, NULL, NULL));
    EXPECT_NULL(attn_st_load_i64(NULL, NULL, NULL));
    EXPECT_STATUS(attn_st_copy_into(NULL, NULL, NULL));
    EXPECT_NOOP(attn_st_writer_free(NULL));
    EXPECT_STATUS(attn_st_writer_add(NULL, NULL, (attn_dtype)0, 1, NULL, NULL));
    EXPECT_STATUS(attn_st_writer_add_ref(NULL, NULL, (attn_dtype)0, 1, NULL, NULL));
    EXPECT_STATUS(attn_st_writer_add_tensor(NULL, NULL, NULL));
    EXPECT_STATUS(attn_st_writer_set_metadata(NULL, NULL, NULL));
    EXPECT_STATUS(attn_st_writer_save(NULL, NULL));
    EXPECT_STATUS(attn_st_writer_header_bytes(NULL, NULL));
    EXPECT_STATUS(attn_params_load(NULL, NULL, NULL, false));
    EXPECT_STATUS(attn_params_load_file(NULL, NULL, NULL, false, NULL));
    EXPECT_STATUS(attn_params_save(NULL, NULL, NULL));
    EXPECT_STATUS(attn_checkpoint_save(NULL, NULL, NULL, NULL, 1));
    EXPECT_STATUS(attn_checkpoint_header_bytes(NULL, NULL, NULL, 1, NULL));
    EXPECT_STATUS(attn_checkpoint_load(NULL, NULL, NULL, false));
    EXPECT_STATUS(attn_checkpoint_load_file(NULL, NULL, NULL, false));
    EXPECT_STATUS(attn_checkpoint_average(NULL, NULL, 1));
    /* attn_set_error records the caller's status, whatever the format */
    note("attn_set_error(ATTN_ERR_IO, NULL)");
    attn_clear_error();
    TK_CHECK(attn_set_error(ATTN_ERR_IO, NULL) == ATTN_ERR_IO && attn_last_status() == ATTN_ERR_IO,
             "attn_set_error(status, NULL) records status");
}

/* A valid ctx, valid tensors, and one tensor NULL: x (2, 3) serves every slot; the NULL is
 * reported before any shape is looked at. Tensors the header calls optional (layer_norm's
 * weight and bias, linear's and conv1d's bias, nw_forward's w) are not among them. */
static void one_null_tensor(void)
{
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *x = attn_tensor_zeros(ctx, 2, (int64_t[]){2, 3});
    if (!ctx || !x) {
        TK_CHECK(false, "ctx and x: %s", attn_last_error());
        attn_ctx_free(ctx);
        return;
    }
    EXPECT_STATUS(attn_backward(ctx, NULL));
    EXPECT_NULL(attn_matmul(ctx, NULL, x, false, false));
    EXPECT_NULL(attn_matmul(ctx, x, NULL, false, false));
    EXPECT_NULL(attn_add(ctx, NULL, x));
    EXPECT_NULL(attn_add(ctx, x, NULL));
    EXPECT_NULL(attn_sub(ctx, NULL, x));
    EXPECT_NULL(attn_sub(ctx, x, NULL));
    EXPECT_NULL(attn_mul(ctx, NULL, x));
    EXPECT_NULL(attn_mul(ctx, x, NULL));
    EXPECT_NULL(attn_div(ctx, NULL, x));
    EXPECT_NULL(attn_div(ctx, x, NULL));
    EXPECT_NULL(attn_scale(ctx, NULL, 1.0f));
    EXPECT_NULL(attn_bias_add(ctx, NULL, x));
    EXPECT_NULL(attn_bias_add(ctx, x, NULL));
    EXPECT_NULL(attn_relu(ctx, NULL));
    EXPECT_NULL(attn_gelu(ctx, NULL));
    EXPECT_NULL(attn_gelu_tanh(ctx, NULL));
    EXPECT_NULL(attn_silu(ctx, NULL));
    EXPECT_NULL(attn_tanh(ctx, NULL));
    EXPECT_NULL(attn_sigmoid(ctx, NULL));
    EXPECT_NULL(attn_exp(ctx, NULL));
    EXPECT_NULL(attn_softmax(ctx, NULL, 1));
    EXPECT_NULL(attn_log_softmax(ctx, NULL, 1));
    EXPECT_NULL(attn_layer_norm(ctx, NULL, x, x, 1.0f));
    EXPECT_NULL(attn_rms_norm(ctx, NULL, x, 1.0f));
    EXPECT_NULL(attn_dropout(ctx, NULL, 1.0f));
    EXPECT_NULL(attn_linear(ctx, NULL, x, x));
    EXPECT_NULL(attn_linear(ctx, x, NULL, x));
    EXPECT_NULL(attn_conv1d(ctx, NULL, x, x, 1));
    EXPECT_NULL(attn_conv1d(ctx, x, NULL, x, 1));
    EXPECT_NULL(attn_sum(ctx, NULL, 1, false));
    EXPECT_NULL(attn_mean(ctx, NULL, 1, false));
    EXPECT_NULL(attn_sum_all(ctx, NULL));
    EXPECT_NULL(attn_mean_all(ctx, NULL));
    EXPECT_NULL(attn_transpose(ctx, NULL, 1, 1));
    EXPECT_NULL(attn_narrow(ctx, NULL, 1, 1, 1));
    EXPECT_NULL(attn_split_heads(ctx, NULL, 1));
    EXPECT_NULL(attn_merge_heads(ctx, NULL));
    EXPECT_NULL(attn_mse_loss(ctx, NULL, x));
    EXPECT_NULL(attn_mse_loss(ctx, x, NULL));
    EXPECT_NULL(attn_additive_scores(ctx, NULL, x, x));
    EXPECT_NULL(attn_additive_scores(ctx, x, NULL, x));
    EXPECT_NULL(attn_additive_scores(ctx, x, x, NULL));
    EXPECT_NULL(attn_nw_forward(ctx, x, NULL, x, x, NULL));
    EXPECT_NULL(attn_nw_forward(ctx, x, x, NULL, x, NULL));
    EXPECT_NULL(attn_nw_forward(ctx, x, x, x, NULL, NULL));
    EXPECT_NULL(attn_nw_leave_one_out(ctx, NULL));
    EXPECT_NULL(attn_add_positions(ctx, NULL, x));
    EXPECT_NULL(attn_add_positions(ctx, x, NULL));
    attn_rope_opts rope = {ATTN_ROPE_HALVES, 10000.0f, 0, 0, NULL, 0};
    EXPECT_NULL(attn_rope(ctx, NULL, &rope));
    EXPECT_NULL(attn_rope(ctx, x, NULL));
    /* a NULL that comes from a failed op keeps that op's error: chains are checked at the end */
    attn_clear_error();
    attn_tensor *bad = attn_matmul(ctx, x, x, false, false); /* (2, 3) @ (2, 3): shape error */
    attn_tensor *y = attn_relu(ctx, attn_add(ctx, bad, x));
    TK_CHECK(!bad && !y && attn_last_status() == ATTN_ERR_SHAPE && strstr(attn_last_error(), "matmul"),
             "a chain keeps the first failure (matmul's shape error), got \"%s\"", attn_last_error());
    attn_ctx_free(ctx);
}

/* Every ATTN_API function of the header (include/<header>, at least min_functions of them) is
 * called above or takes no pointer. */
static void coverage(const char *header, int min_functions)
{
    char path[64];
    snprintf(path, sizeof path, "include/%s", header);
    FILE *f = fopen(path, "r");
    TK_CHECK(f != NULL, "%s readable from the working folder", path);
    if (!f) return;
    char line[1024];
    int functions = 0;
    while (fgets(line, sizeof line, f)) {
        char *api = strstr(line, "ATTN_API ");
        if (api != line) continue; /* declarations start their line with ATTN_API */
        char *paren = strchr(api, '(');
        char *name = paren;
        while (name && name > api && name[-1] != ' ' && name[-1] != '*') name--;
        if (!paren || !name || paren == name) continue;
        char fn[128], with_paren[130];
        snprintf(fn, sizeof fn, "%.*s", (int)(paren - name), name);
        snprintf(with_paren, sizeof with_paren, "%s(", fn);
        bool found = false;
        for (int i = 0; !found && i < n_called; i++) found = strncmp(called[i], with_paren, strlen(with_paren)) == 0;
        for (size_t i = 0; !found && i < sizeof no_pointer_arguments / sizeof *no_pointer_arguments; i++)
            found = strcmp(no_pointer_arguments[i], fn) == 0;
        TK_CHECK(found, "%s (%s) is called with NULL arguments by this test", fn, path);
        functions++;
    }
    fclose(f);
    TK_CHECK(functions >= min_functions, "read %d public functions from %s", functions, path);
    printf("test_api_null: %s: %d public functions\n", path, functions);
}

/* The header's version is the library's. */
static void version(void)
{
    char text[32];
    snprintf(text, sizeof text, "%d.%d.%d", ATTN_VERSION_MAJOR, ATTN_VERSION_MINOR, ATTN_VERSION_PATCH);
    TK_CHECK(attn_version_number() == ATTN_VERSION_NUMBER &&
                 ATTN_VERSION_NUMBER == ATTN_VERSION_MAJOR * 10000 + ATTN_VERSION_MINOR * 100 + ATTN_VERSION_PATCH,
             "attn_version_number() %d = ATTN_VERSION_NUMBER %d", attn_version_number(), ATTN_VERSION_NUMBER);
    TK_CHECK(strcmp(attn_version(), text) == 0, "attn_version() \"%s\" = the header's \"%s\"", attn_version(), text);
}

int main(void)
{
    version();
    all_null();
    one_null_tensor();
    coverage("attn.h", 150);
#ifdef ATTN_TEST_DATA
    coverage("attn_data.h", 40);
#endif
#ifdef ATTN_TEST_PLOT
    coverage("attn_plot.h", 4);
#endif
    return tk_finish("test_api_null");
}
