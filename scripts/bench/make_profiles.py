#!/usr/bin/env python3
"""Writes bench/profiles/*.txt, the gradient profiles `ringtrain bench` runs.

Each profile lists a model's parameter tensors in the order backward finishes their gradients
(the reverse of the order the model registers them, the order PyTorch DDP and Horovod bucket
them in), one line per tensor:

    name shape flops-per-sample

shape is the dimensions joined by 'x'. flops-per-sample is the forward FLOPs (a multiply-add is
2) per sample of the work backward does just before this tensor's gradient is final: a conv is
2*K*K*Cin*Cout*Hout*Wout, a dense layer 2*in*out per token, both on the layer's weight; the
attention matmuls are put on their block's first attention weight in backward order, a tied
output head on the first tensor of backward. Biases, norms and embedding lookups count 0.

The shapes come from the architectures as their libraries define them (written out here, so that
neither torchvision nor transformers is needed); each total is checked against the published
figure before anything is written. Run from anywhere: python3 scripts/bench/make_profiles.py
"""
import pathlib
import sys

OUT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "profiles"


class Profile:
    def __init__(self):
        self.tensors = []  # (name, shape, flops) in registration (forward) order

    def add(self, name, shape, flops=0):
        self.tensors.append((name, tuple(shape), int(flops)))

    def parameters(self):
        total = 0
        for _, shape, _ in self.tensors:
            count = 1
            for d in shape:
                count *= d
            total += count
        return total


def conv_flops(k, cin, cout, hout, wout):
    return 2 * k * k * cin * cout * hout * wout


# --- torchvision ResNet (v1.5: the stride on the 3x3 conv), Bottleneck blocks, 224x224 input ---
def resnet(blocks):
    p = Profile()
    size = 112  # after conv1 (stride 2)
    p.add("conv1.weight", (64, 3, 7, 7), conv_flops(7, 3, 64, size, size))
    p.add("bn1.weight", (64,))
    p.add("bn1.bias", (64,))
    size = 56  # after the max-pool
    inplanes = 64
    for stage, (count, width) in enumerate(zip(blocks, (64, 128, 256, 512)), start=1):
        for b in range(count):
            stride = 2 if (b == 0 and stage > 1) else 1
            out = size // stride
            prefix = f"layer{stage}.{b}"
            p.add(f"{prefix}.conv1.weight", (width, inplanes, 1, 1),
                  conv_flops(1, inplanes, width, size, size))
            p.add(f"{prefix}.bn1.weight", (width,))
            p.add(f"{prefix}.bn1.bias", (width,))
            p.add(f"{prefix}.conv2.weight", (width, width, 3, 3), conv_flops(3, width, width, out, out))
            p.add(f"{prefix}.bn2.weight", (width,))
            p.add(f"{prefix}.bn2.bias", (width,))
            p.add(f"{prefix}.conv3.weight", (width * 4, width, 1, 1),
                  conv_flops(1, width, width * 4, out, out))
            p.add(f"{prefix}.bn3.weight", (width * 4,))
            p.add(f"{prefix}.bn3.bias", (width * 4,))
            if b == 0:
                p.add(f"{prefix}.downsample.0.weight", (width * 4, inplanes, 1, 1),
                      conv_flops(1, inplanes, width * 4, out, out))
                p.add(f"{prefix}.downsample.1.weight", (width * 4,))
                p.add(f"{prefix}.downsample.1.bias", (width * 4,))
            inplanes = width * 4
            size = out
    p.add("fc.weight", (1000, 2048), 2 * 2048 * 1000)
    p.add("fc.bias", (1000,))
    return p


# --- torchvision vgg16 (configuration D, no batch norm), 224x224 input ---
def vgg16():
    p = Profile()
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    index, cin, size = 0, 3, 224
    for v in cfg:
        if v == "M":
            index += 1
            size //= 2
            continue
        p.add(f"features.{index}.weight", (v, cin, 3, 3), conv_flops(3, cin, v, size, size))
        p.add(f"features.{index}.bias", (v,))
        index += 2  # the conv and its ReLU
        cin = v
    for index, (fin, fout) in zip((0, 3, 6), ((512 * 7 * 7, 4096), (4096, 4096), (4096, 1000))):
        p.add(f"classifier.{index}.weight", (fout, fin), 2 * fin * fout)
        p.add(f"classifier.{index}.bias", (fout,))
    return p


# --- Hugging Face BertModel, bert-large-uncased, sequences of 128 tokens (pre-training phase 1) ---
def bert_large(seq=128):
    p = Profile()
    hidden, layers, heads, inter, vocab = 1024, 24, 16, 4096, 30522
    p.add("embeddings.word_embeddings.weight", (vocab, hidden))
    p.add("embeddings.position_embeddings.weight", (512, hidden))
    p.add("embeddings.token_type_embeddings.weight", (2, hidden))
    p.add("embeddings.LayerNorm.weight", (hidden,))
    p.add("embeddings.LayerNorm.bias", (hidden,))
    dense = lambda fin, fout: 2 * fin * fout * seq
    attention = 2 * 2 * seq * seq * hidden  # scores Q K^T and their product with V, all heads
    for i in range(layers):
        prefix = f"encoder.layer.{i}"
        p.add(f"{prefix}.attention.self.query.weight", (hidden, hidden), dense(hidden, hidden))
        p.add(f"{prefix}.attention.self.query.bias", (hidden,))
        p.add(f"{prefix}.attention.self.key.weight", (hidden, hidden), dense(hidden, hidden))
        p.add(f"{prefix}.attention.self.key.bias", (hidden,))
        # value.weight is the first of Q, K, V in backward order: the attention matmuls go there
        p.add(f"{prefix}.attention.self.value.weight", (hidden, hidden),
              dense(hidden, hidden) + attention)
        p.add(f"{prefix}.attention.self.value.bias", (hidden,))
        p.add(f"{prefix}.attention.output.dense.weight", (hidden, hidden), dense(hidden, hidden))
        p.add(f"{prefix}.attention.output.dense.bias", (hidden,))
        p.add(f"{prefix}.attention.output.LayerNorm.weight", (hidden,))
        p.add(f"{prefix}.attention.output.LayerNorm.bias", (hidden,))
        p.add(f"{prefix}.intermediate.dense.weight", (inter, hidden), dense(hidden, inter))
        p.add(f"{prefix}.intermediate.dense.bias", (inter,))
        p.add(f"{prefix}.output.dense.weight", (hidden, inter), dense(inter, hidden))
        p.add(f"{prefix}.output.dense.bias", (hidden,))
        p.add(f"{prefix}.output.LayerNorm.weight", (hidden,))
        p.add(f"{prefix}.output.LayerNorm.bias", (hidden,))
    p.add("pooler.dense.weight", (hidden, hidden), 2 * hidden * hidden)  # the first token only
    p.add("pooler.dense.bias", (hidden,))
    return p


# --- GPT-2 124M as ringtrain's gpt2-124m builds it (models/model_factory.cc): dense weights are
# {out, in} (Hugging Face's Conv1D stores them transposed), lm_head tied to wte, context 1024 ---
def gpt2_124m(context=1024):
    p = Profile()
    width, layers, vocab = 768, 12, 50257
    dense = lambda fin, fout: 2 * fin * fout * context
    p.add("wte.weight", (vocab, width))
    p.add("wpe.weight", (context, width))
    attention = 2 * 2 * context * context * width
    for i in range(layers):
        prefix = f"h.{i}"
        p.add(f"{prefix}.ln_1.weight", (width,))
        p.add(f"{prefix}.ln_1.bias", (width,))
        p.add(f"{prefix}.attn.c_attn.weight", (3 * width, width), dense(width, 3 * width) + attention)
        p.add(f"{prefix}.attn.c_attn.bias", (3 * width,))
        p.add(f"{prefix}.attn.c_proj.weight", (width, width), dense(width, width))
        p.add(f"{prefix}.attn.c_proj.bias", (width,))
        p.add(f"{prefix}.ln_2.weight", (width,))
        p.add(f"{prefix}.ln_2.bias", (width,))
        p.add(f"{prefix}.mlp.c_fc.weight", (4 * width, width), dense(width, 4 * width))
        p.add(f"{prefix}.mlp.c_fc.bias", (4 * width,))
        p.add(f"{prefix}.mlp.c_proj.weight", (width, 4 * width), dense(4 * width, width))
        p.add(f"{prefix}.mlp.c_proj.bias", (width,))
    # ln_f.bias is the first gradient of backward: the tied output head's product comes before it
    p.add("ln_f.weight", (width,))
    p.add("ln_f.bias", (width,), dense(width, vocab))
    return p


PROFILES = {
    "resnet50": (lambda: resnet((3, 4, 6, 3)), 25_557_032,
                 "torchvision.models.resnet50 (ResNet-50 v1.5, He et al. 2015, arXiv:1512.03385); "
                 "25,557,032 parameters as torchvision's model table gives them; input 224x224"),
    "resnet101": (lambda: resnet((3, 4, 23, 3)), 44_549_160,
                  "torchvision.models.resnet101 (ResNet-101 v1.5, arXiv:1512.03385); "
                  "44,549,160 parameters as torchvision's model table gives them; input 224x224"),
    "vgg16": (vgg16, 138_357_544,
              "torchvision.models.vgg16 (configuration D, Simonyan & Zisserman 2014, "
              "arXiv:1409.1556); 138,357,544 parameters as torchvision's model table gives them; "
              "input 224x224"),
    "bert-large": (bert_large, 335_141_888,
                   "Hugging Face transformers BertModel for bert-large-uncased (Devlin et al. 2018, "
                   "arXiv:1810.04805: 24 layers, width 1024, 16 heads, FFN 4096, vocabulary 30522, "
                   "512 positions, 2 token types); 335,141,888 parameters with the pooler; "
                   "FLOPs for sequences of 128 tokens"),
    "gpt2-124m": (gpt2_124m, 124_439_808,
                  "GPT-2 small (Radford et al. 2019) as ringtrain --model gpt2-124m builds it "
                  "(models/model_factory.cc; Hugging Face GPT2Model's tensors, dense weights "
                  "{out, in}, lm_head tied to wte); 124,439,808 parameters; FLOPs for sequences "
                  "of 1024 tokens"),
}


def write(name, profile, source):
    backward = list(reversed(profile.tensors))
    lines = [
        f"# ringtrain gradient profile: {name} (written by scripts/bench/make_profiles.py)",
        f"# source: {source}",
        f"# {len(backward)} tensors, {profile.parameters()} parameters, "
        f"{sum(t[2] for t in backward)} forward FLOPs per sample",
        "# one line per parameter tensor, in the order backward finishes their gradients:",
        "# name shape flops-per-sample (forward FLOPs of the work backward does before this "
        "gradient is final)",
    ]
    for tensor_name, shape, flops in backward:
        lines.append(f"{tensor_name} {'x'.join(str(d) for d in shape)} {flops}")
    (OUT / f"{name}.txt").write_text("\n".join(lines) + "\n")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (build, published, source) in PROFILES.items():
        profile = build()
        if profile.parameters() != published:
            sys.exit(f"{name}: {profile.parameters()} parameters computed, {published} published")
        write(name, profile, source)
        print(f"{name}: {len(profile.tensors)} tensors, {profile.parameters()} parameters")


if __name__ == "__main__":
    main()
