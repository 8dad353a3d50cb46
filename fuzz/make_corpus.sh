#!/usr/bin/env bash
# Writes the seed corpora under fuzz/corpus/<target>/ (committed; rerun only to change them).
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/robustness/lib.sh
c=fuzz/corpus
mkdir -p $c/safetensors $c/tokenizer $c/imdb $c/parallel

# safetensors: valid files of every dtype, a checkpoint, metadata, scalars and empty tensors,
# and a few broken ones
st=$c/safetensors
st_file $st/qkv.safetensors '{"q":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[0,16]},"k":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[16,32]},"v":{"dtype":"F32","shape":[1,1,2,2],"data_offsets":[32,48]}}' "$(f32 1 0 0 1 1 1 0 0 0.5 0.5 -1 2)"
st_file $st/dtypes.safetensors '{"__metadata__":{"format":"pt"},"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},"b":{"dtype":"I64","shape":[2],"data_offsets":[16,32]},"c":{"dtype":"I32","shape":[1],"data_offsets":[32,36]},"d":{"dtype":"F16","shape":[2],"data_offsets":[36,40]},"e":{"dtype":"BF16","shape":[2],"data_offsets":[40,44]},"f":{"dtype":"I16","shape":[1],"data_offsets":[44,46]},"g":{"dtype":"I8","shape":[1],"data_offsets":[46,47]},"h":{"dtype":"U8","shape":[1],"data_offsets":[47,48]},"i":{"dtype":"BOOL","shape":[2,1],"data_offsets":[48,50]}}' \
  '\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x00\x00\x00\x00\x00\xf8\x7f\x05\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\x07\x00\x00\x00\x00\x3c\x00\x7c\x80\x3f\x80\x7f\xfe\xff\x80\xff\x01\x00'
st_file $st/checkpoint.safetensors '{"__metadata__":{"format":"attn-checkpoint","version":"1","step":"3","run.epoch":"1"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"exp_avg.w":{"dtype":"F32","shape":[4],"data_offsets":[16,32]},"exp_avg_sq.w":{"dtype":"F32","shape":[4],"data_offsets":[32,48]}}' "$(f32 1 0 0 1 1 1 0 0 0.5 0.5 1 2)"
st_file $st/scalar_empty.safetensors '{"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"z":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4]},"m":{"dtype":"I64","shape":[1,1,1,1,1,1,1,1],"data_offsets":[4,12]}}' "$(f32 2)\\x03\\x00\\x00\\x00\\x00\\x00\\x00\\x00"
st_file $st/escapes.safetensors '{"na\u00efve \"q\"":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}}   ' 'abc'
st_file $st/overlap.safetensors '{"q":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"k":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}' "$(f32 1 0 1)"
{ printf "$(le64 1000)"; printf '{}'; } > $st/header_beyond.safetensors
st_file $st/overflow.safetensors '{"q":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,16]}}' "$(f32 1 0 0 1)"

# tokenizer: texts the tokenizers treat specially
t=$c/tokenizer
printf "I loved this movie!<br /><br />It's \"great\", (really) great; 10/10: isn't it?" > $t/english.txt
printf "Va-t'en, l\xe2\x80\x99herbe est plus verte \xc2\xa0\xc2\xbb ailleurs\xe2\x80\xaf!\n\xc3\x80 bient\xc3\xb4t." > $t/french.txt
printf '\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xe3\x80\x82 \xe6\xb3\xa8\xe6\x84\x8f\xe5\x8a\x9b' > $t/chinese.txt
printf '\xce\x9f\xce\x94\xce\x9f\xce\xa3 \xce\xa3\xce\x91 \xc4\xb0stanbul \xc3\x9f\xe1\xba\x9e \xef\xac\x81 \xe2\x84\xab' > $t/case.txt
printf 'a&quot;b&amp;c&lt;d&gt;e -\nf 3.14 1,000 x.y. \t\r\n end' > $t/13a.txt
printf 'caf\xe9 \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf' > $t/invalid.txt
printf 'e\xcc\x81 \xd9\xa3\xd9\xa4 \xe0\xa5\xa7 a\xe2\x80\x8bb' > $t/combining.txt

# imdb: flags byte, file name line, review
i=$c/imdb
printf '\x01%s\n%s' "12_3.txt" "A dull film. <br /><br />I wanted to leave." > $i/review.bin
printf '\x03%s\n%s' "4_10.txt" "Superb acting!" > $i/review_gz.bin
printf '\x04%s\n%s' "README" "not a review" > $i/other_name.bin
printf '\x05%s\n%s' "999999999999999999_7.txt" "caf\xe9" > $i/latin1.bin
printf '\x01%s\n' "0_1.txt" > $i/empty_review.bin

# parallel: source NUL target, and tab-separated lines
p=$c/parallel
printf 'Two dogs run .\nA man sleeps .\n\0Deux chiens courent .\nUn homme dort .\n' > $p/pairs.bin
printf 'Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org\r\nHi.\tSalut\xe2\x80\xaf!\n\nRun!\tCours\xc2\xa0!\n' > $p/tsv.bin
printf 'one line\nno tab\n\0une ligne\n' > $p/misaligned.bin
printf '\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03' > $p/gzip_header_only.bin
echo "fuzz/corpus: $(find $c -type f | wc -l) files, $(du -sk $c | cut -f1) KiB"

# op: the layout of fuzz/fuzz_op.c (mechanism, flags, heads, scale, then records of name index,
# dtype index, ndim, dims, value mode, values): one valid input per mechanism, masks included
mkdir -p $c/op
python3 - "$c/op" <<'PY'
import os, sys
import re
# the name table of fuzz/fuzz_op.c, read from the source so the two cannot drift
src = open("fuzz/fuzz_op.c").read()
names = re.findall(r'"([^"]+)"', src[src.index("names[] = {"):src.index("};", src.index("names[] = {"))])
F32, BOOL, I64 = 0, 3, 4  # indexes into fuzz_op.c's dtypes[]
def rec(name, dtype, shape, vals=None):
    n = 1
    for d in shape: n *= d
    vals = vals if vals is not None else [(7 * i + 3) % 31 - 15 for i in range(n)]
    return bytes([names.index(name), dtype, len(shape), *shape, 0]) + bytes(v & 0xff for v in vals)
seeds = {
    "sdpa_masks": bytes([0, 0x02, 0, 0]) + rec("q", F32, [1, 1, 2, 2]) + rec("k", F32, [1, 1, 2, 2])
        + rec("v", F32, [1, 1, 2, 2]) + rec("attn_mask", BOOL, [2, 2], [1, 0, 1, 1])
        + rec("key_padding_mask", BOOL, [1, 2], [0, 0]) + rec("valid_lens", I64, [1], [2])
        + rec("grad_out", F32, [1, 1, 2, 2]),
    "mha_masks": bytes([1, 0x0a, 1, 0]) + rec("q", F32, [1, 2, 2]) + rec("k", F32, [1, 2, 2])
        + rec("v", F32, [1, 2, 2]) + rec("in_proj_weight", F32, [6, 2]) + rec("in_proj_bias", F32, [6])
        + rec("out_proj.weight", F32, [2, 2]) + rec("out_proj.bias", F32, [2])
        + rec("attn_mask", BOOL, [2, 2], [0, 1, 0, 0]) + rec("key_padding_mask", BOOL, [1, 2], [0, 0])
        + rec("grad_out", F32, [1, 2, 2]),
    "additive_lens": bytes([2, 0x02, 0, 0]) + rec("q", F32, [1, 2, 2]) + rec("k", F32, [1, 3, 2])
        + rec("v", F32, [1, 3, 2]) + rec("W_q.weight", F32, [3, 2]) + rec("W_k.weight", F32, [3, 2])
        + rec("w_v.weight", F32, [1, 3]) + rec("valid_lens", I64, [1], [2]),
    "nw_learned": bytes([3, 0x02, 0, 0]) + rec("q", F32, [3]) + rec("k", F32, [3, 2])
        + rec("v", F32, [3, 2]) + rec("w", F32, [1], [16]) + rec("grad_out", F32, [3]),
    "linear_padding": bytes([4, 0, 0, 0]) + rec("x", F32, [1, 3, 2])
        + b"".join(rec(n, F32, [2, 2] if n.endswith("weight") else [2]) for n in
                   ["to_query.weight", "to_query.bias", "to_key.weight", "to_key.bias", "to_value.weight",
                    "to_value.bias"])
        + rec("key_padding_mask", BOOL, [1, 3], [0, 0, 1]),
    "conv_attention": bytes([5, 0x02, 1, 0]) + rec("x", F32, [1, 3, 2])
        + rec("attention.in_proj_weight", F32, [6, 2]) + rec("attention.in_proj_bias", F32, [6])
        + rec("attention.out_proj.weight", F32, [2, 2]) + rec("attention.out_proj.bias", F32, [2])
        + rec("conv.weight", F32, [2, 2, 3]) + rec("conv.bias", F32, [2]) + rec("norm.weight", F32, [2])
        + rec("norm.bias", F32, [2]),
}
for name, data in seeds.items():
    with open(os.path.join(sys.argv[1], name + ".bin"), "wb") as f:
        f.write(data)
PY
