"""Network: a small MobileNetV2 classifier: a stride-2 stem convolution, nine inverted residual blocks (expansion 1
or 6, depthwise 3x3, widths 16-64, four stride-2 stages), a 1x1 convolution to 512 features, global average pooling
and a 1000-way linear head; 64 x 3 x 224 x 224 float32 images in (39 MB), 64 x 1000 logits out.

Mostly memory-bound: depthwise convolutions, batch norms and ReLU6 between thin 1x1 convolutions.
"""

import torch
import torch.nn as nn

CATEGORY = "network"

BATCH = 64
IMAGE = 224
CLASSES = 1000

# (expansion t, output channels c, repeats n, first stride s), as the MobileNetV2 paper tabulates its stages.
STAGES = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 3, 2)]


def load_trained_statistics(model):
    """Give every batch norm the scale, shift and running statistics a trained checkpoint has (fresh ones make
    it an identity, which would hide a kernel that skips it)."""
    with torch.no_grad():
        for norm in model.modules():
            if isinstance(norm, nn.BatchNorm2d):
                norm.weight.uniform_(0.5, 1.5)
                norm.bias.uniform_(-0.5, 0.5)
                norm.running_mean.uniform_(-0.5, 0.5)
                norm.running_var.uniform_(0.5, 2.0)


class ConvBNReLU(nn.Sequential):
    def __init__(self, in_planes, out_planes, kernel_size=3, stride=1, groups=1):
        padding = (kernel_size - 1) // 2
        super().__init__(
            nn.Conv2d(in_planes, out_planes, kernel_size, stride, padding, groups=groups, bias=False),
            nn.BatchNorm2d(out_planes),
            nn.ReLU6(inplace=True),
        )


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, expand_ratio):
        super().__init__()
        hidden_dim = inp * expand_ratio
        self.use_res_connect = stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(ConvBNReLU(inp, hidden_dim, kernel_size=1))
        layers += [
            ConvBNReLU(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim),
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
            nn.BatchNorm2d(oup),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


class Model(nn.Module):
    def __init__(self, num_classes, last_channel):
        super().__init__()
        input_channel = 32
        features = [ConvBNReLU(3, input_channel, stride=2)]
        for t, c, n, s in STAGES:
            for i in range(n):
                features.append(InvertedResidual(input_channel, c, s if i == 0 else 1, expand_ratio=t))
                input_channel = c
        features.append(ConvBNReLU(input_channel, last_channel, kernel_size=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last_channel, num_classes))
        load_trained_statistics(self)

    def forward(self, x):
        x = self.features(x)
        x = nn.functional.adaptive_avg_pool2d(x, 1).reshape(x.shape[0], -1)
        return self.classifier(x)


def get_inputs():
    return [torch.randn(BATCH, 3, IMAGE, IMAGE)]


def get_init_inputs():
    return [CLASSES, 512]
