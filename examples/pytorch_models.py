"""The PyTorch models of ringtrain's Python tests and benchmarks, by name, each with a synthetic
batch of its input (examples/pytorch_synthetic_benchmark.py, scripts/bench/pytorch_api.sh,
tests/python/). `tiny-*` are the exactness tests' models, small enough to train in milliseconds.

    model, batch = build("mlp-28m", batch_size=32)
    x, y = batch(torch.Generator().manual_seed(0))
"""
import torch


class Transformer(torch.nn.Module):
    """Classifies a sequence of `tokens` vectors: a linear embedding, `layers` encoder layers,
    the mean over the tokens, a linear head."""

    def __init__(self, features, width, heads, feedforward, layers, classes, tokens):
        super().__init__()
        self.tokens = tokens
        self.embed = torch.nn.Linear(features, width)
        layer = torch.nn.TransformerEncoderLayer(width, heads, dim_feedforward=feedforward,
                                                 dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(width, classes)
        # The key bias moves no output (softmax ignores a shift), so its gradient is rounding
        # noise, which AdamW scales up to full steps: 1 and N ranks' noise differ by far more
        # than 1e-5. Frozen (the query and value biases with it: PyTorch keeps them together).
        for encoder_layer in self.encoder.layers:
            encoder_layer.self_attn.in_proj_bias.requires_grad_(False)

    def forward(self, x):  # x: batch x tokens x features, or batch x (tokens * features)
        tokens = self.embed(x.view(x.shape[0], self.tokens, -1))
        return self.head(self.encoder(tokens).mean(dim=1))


def mlp(widths):
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def _resnet50():
    try:
        import torchvision
    except ImportError:
        raise ImportError("the model resnet50 needs torchvision (python3-torchvision)") from None
    return torchvision.models.resnet50()


# name: (make the model, the shape of one sample, the number of classes)
MODELS = {
    "tiny-mlp": (lambda: mlp([12, 32, 32, 4]), (12,), 4),
    "tiny-transformer": (lambda: Transformer(4, 16, 2, 32, 1, 4, 3), (12,), 4),
    # 784-4096-4096-2048-10: 28.4M parameters, gradients of 114 MB
    "mlp-28m": (lambda: mlp([784, 4096, 4096, 2048, 10]), (784,), 10),
    # 4 layers of width 256 on 64 tokens: 3.2M parameters
    "transformer": (lambda: Transformer(64, 256, 4, 1024, 4, 10, 64), (64, 64), 10),
    "resnet50": (_resnet50, (3, 224, 224), 1000),
}


def build(name, batch_size, image_size=224):
    """(model, batch): batch(generator) draws `batch_size` inputs and class labels. image_size:
    the side of resnet50's images (any from 32 up; a smaller one for quick tests)."""
    make, shape, classes = MODELS[name]
    if name == "resnet50":
        shape = (3, image_size, image_size)

    def batch(generator=None):
        x = torch.randn((batch_size,) + shape, generator=generator)
        y = torch.randint(0, classes, (batch_size,), generator=generator)
        return x, y

    return make(), batch
