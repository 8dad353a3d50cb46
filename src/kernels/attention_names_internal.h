/* Private: the object-file names of the attention kernels. Their source names (sdpa_*) are short,
 * but a global symbol of the static library must carry the private prefix attn__, or a program
 * that links libattn.a and has its own sdpa_forward_ref would clash with it
 * (tests/symbols_private.sh). So each name is a macro for its prefixed self, as zlib's Z_PREFIX
 * does: code keeps writing sdpa_forward_ref, the object files hold attn__sdpa_forward_ref (and
 * the per-level copies attn__sdpa_forward_ref_avx2, dispatch_internal.h). Included first by attention_internal.h;
 * a new global sdpa_ function gets its line here. */
#ifndef ATTN_KERNELS_ATTENTION_NAMES_H
#define ATTN_KERNELS_ATTENTION_NAMES_H

#define sdpa_forward_ref attn__sdpa_forward_ref
#define sdpa_backward_ref attn__sdpa_backward_ref
#define sdpa_ref_scratch_floats attn__sdpa_ref_scratch_floats
#define sdpa_forward_fused attn__sdpa_forward_fused
#define sdpa_backward_fused attn__sdpa_backward_fused
#define sdpa_fused_scratch_floats attn__sdpa_fused_scratch_floats
#define sdpa_dropout_scale attn__sdpa_dropout_scale
#define sdpa_key_begin attn__sdpa_key_begin
#define sdpa_key_end attn__sdpa_key_end
#define sdpa_query_range attn__sdpa_query_range
#define sdpa_softcap_tile attn__sdpa_softcap_tile
#define sdpa_mask_tile attn__sdpa_mask_tile
#define sdpa_has_elementwise_mask attn__sdpa_has_elementwise_mask
#define sdpa_mask_block attn__sdpa_mask_block
#define sdpa_mods_keep attn__sdpa_mods_keep
#define sdpa_parallel attn__sdpa_parallel

#endif
