# torch_onnx_models.py OUTDIR [NAME...] — writes PyTorch and torchvision models exported by
# torch.onnx.export (random weights, eval mode) for onnx_torch_spec.lua: OUTDIR/NAME.onnx, the
# inputs NAME.in1.npy... and PyTorch's outputs NAME.out1.npy... (float32). Prints one line per
# model: "NAME ok" or "NAME skipped: reason".
import os
import sys

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)


class Scripted(nn.Module):
    """A model with data-dependent `if` and a `for` loop, for torch.jit.script."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = x
        for _ in range(x.size(0)):  # a trip count read at run time: a Loop node
            h = torch.tanh(self.fc(h))
        if h.sum() > 0:
            y = h * 2.0
        else:
            y = h - 1.0
        return y


def mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)), [torch.randn(3, 8)]


def cnn():
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(8, 5))
    m.train()
    for _ in range(3):
        m(torch.randn(4, 3, 16, 16))
    return m, [torch.randn(2, 3, 16, 16)]


def resnet18():
    import torchvision
    return torchvision.models.resnet18(weights=None), [torch.randn(1, 3, 224, 224)]


def calibrated(m, x):
    """m with batch norm statistics of one batch (random init leaves outputs near zero otherwise)."""
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.momentum = 1.0
    m.train()
    with torch.no_grad():
        m(x)
    return m


def mobilenet_v2():
    import torchvision
    m = calibrated(torchvision.models.mobilenet_v2(weights=None), torch.randn(4, 3, 96, 96))
    return m, [torch.randn(1, 3, 96, 96)]


def lstm():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(6, 8, num_layers=2, batch_first=True)

        def forward(self, x):
            y, (h, c) = self.lstm(x)
            return y, h, c
    return M(), [torch.randn(2, 5, 6)]


def transformer():
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), [torch.randn(2, 7, 16)]


def scripted():
    return torch.jit.script(Scripted()), [torch.randn(2, 4)]


MODELS = {"mlp": mlp, "cnn": cnn, "resnet18": resnet18, "mobilenet_v2": mobilenet_v2, "lstm": lstm,
          "transformer": transformer, "scripted": scripted}


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    for name in names:
        try:
            model, inputs = MODELS[name]()
            model.eval()
            with torch.no_grad():
                outs = model(*inputs)
            if not isinstance(outs, (tuple, list)):
                outs = (outs,)
            path = os.path.join(out, name + ".onnx")
            torch.onnx.export(model, tuple(inputs), path, opset_version=13,
                              input_names=["in%d" % (i + 1) for i in range(len(inputs))],
                              output_names=["out%d" % (i + 1) for i in range(len(outs))])
            for i, t in enumerate(inputs):
                np.save(os.path.join(out, "%s.in%d.npy" % (name, i + 1)), t.numpy())
            for i, t in enumerate(outs):
                np.save(os.path.join(out, "%s.out%d.npy" % (name, i + 1)), t.numpy())
            print(name, "ok", flush=True)
        except Exception as e:  # reported to the spec, which fails on it
            print(name, "skipped:", type(e).__name__, str(e).splitlines()[0] if str(e) else "", flush=True)


if __name__ == "__main__":
    main()
