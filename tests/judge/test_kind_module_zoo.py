"""Every module class of torch.nn goes to the learner's function: built with typical arguments, passed
to a function in the kernel that runs it on an input, returns it as is, copies it, and changes it
(eval(), a parameter written into and replaced), with the same outcome as in one process.  The
classes that cannot go are listed with the reason, and the judge refuses each saying what to do.

The classes are found by walking torch.nn.modules, so a class a new torch adds fails
``test_every_module_class_of_torch_nn_is_built_here_or_listed_as_unable_to_go`` until it is added."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import warnings

import pytest
import torch
from torch import nn

from autograder.judge import Judge
from judge_helpers import errors_of, kernel

F = nn.functional


def r(*shape):
    return torch.randn(*shape)


# uninitialised parameters: what their shape will be is known only after a first forward pass
LAZY = "a lazy module: its parameters are made by its first forward pass (run it once on an input first)"
CANNOT_GO = {name: LAZY for name in (
    "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyConv1d", "LazyConv2d", "LazyConv3d",
    "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
    "LazyInstanceNorm3d", "LazyLinear")}


def torch_nn_classes() -> dict[str, type]:
    """The public module classes defined in torch.nn.modules, by name."""
    found = {}
    for info in pkgutil.walk_packages(nn.modules.__path__, "torch.nn.modules."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, nn.Module) and obj.__module__ == info.name
                    and not name.startswith("_")):
                found[name] = obj
    return found


def zoo() -> dict:
    """class name -> (build it, its forward's arguments or None)."""
    x3 = lambda: (r(2, 3, 8),)
    x4 = lambda: (r(2, 3, 8, 8),)
    x5 = lambda: (r(2, 3, 4, 4, 4),)
    idx = lambda n: torch.tensor([[1, 2, 0, 3]])
    return {
        "AdaptiveAvgPool1d": (lambda: nn.AdaptiveAvgPool1d(2), x3),
        "AdaptiveAvgPool2d": (lambda: nn.AdaptiveAvgPool2d((2, 3)), x4),
        "AdaptiveAvgPool3d": (lambda: nn.AdaptiveAvgPool3d(2), x5),
        "AdaptiveMaxPool1d": (lambda: nn.AdaptiveMaxPool1d(2), x3),
        "AdaptiveMaxPool2d": (lambda: nn.AdaptiveMaxPool2d(2, return_indices=True), x4),
        "AdaptiveMaxPool3d": (lambda: nn.AdaptiveMaxPool3d(2), x5),
        "AdaptiveLogSoftmaxWithLoss": (lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 8]),
                                       lambda: (r(5, 8), torch.tensor([0, 3, 5, 9, 1]))),
        "AlphaDropout": (lambda: nn.AlphaDropout(0.2), x3),
        "AvgPool1d": (lambda: nn.AvgPool1d(2), x3),
        "AvgPool2d": (lambda: nn.AvgPool2d(2, stride=1, padding=1, count_include_pad=False), x4),
        "AvgPool3d": (lambda: nn.AvgPool3d(2), x5),
        "BCELoss": (lambda: nn.BCELoss(weight=torch.rand(3)), lambda: (torch.rand(2, 3), torch.rand(2, 3))),
        "BCEWithLogitsLoss": (lambda: nn.BCEWithLogitsLoss(pos_weight=torch.ones(3) * 2), lambda: (r(2, 3), torch.rand(2, 3))),
        "BatchNorm1d": (lambda: nn.BatchNorm1d(3), x3),
        "BatchNorm2d": (lambda: nn.BatchNorm2d(3, momentum=None), x4),
        "BatchNorm3d": (lambda: nn.BatchNorm3d(3, affine=False), x5),
        "Bilinear": (lambda: nn.Bilinear(3, 4, 2), lambda: (r(5, 3), r(5, 4))),
        "CELU": (lambda: nn.CELU(0.5), x3),
        "CTCLoss": (lambda: nn.CTCLoss(), lambda: (r(6, 2, 5).log_softmax(2), torch.tensor([[1, 2], [3, 4]]),
                                                  torch.tensor([6, 6]), torch.tensor([2, 2]))),
        "ChannelShuffle": (lambda: nn.ChannelShuffle(2), lambda: (r(1, 4, 2, 2),)),
        "CircularPad1d": (lambda: nn.CircularPad1d(2), x3),
        "CircularPad2d": (lambda: nn.CircularPad2d((1, 2, 0, 1)), x4),
        "CircularPad3d": (lambda: nn.CircularPad3d(1), x5),
        "ConstantPad1d": (lambda: nn.ConstantPad1d(2, 3.5), x3),
        "ConstantPad2d": (lambda: nn.ConstantPad2d((1, 0, 2, 0), -1.0), x4),
        "ConstantPad3d": (lambda: nn.ConstantPad3d(1, 0.5), x5),
        "Container": (lambda: nn.Container(a=nn.Linear(2, 2)), None),
        "Conv1d": (lambda: nn.Conv1d(3, 4, 3, stride=2, dilation=2), x3),
        "Conv2d": (lambda: nn.Conv2d(3, 4, 3, padding="same", padding_mode="reflect", bias=False), x4),
        "Conv3d": (lambda: nn.Conv3d(3, 2, 2, groups=1, padding=1, padding_mode="circular"), x5),
        "ConvTranspose1d": (lambda: nn.ConvTranspose1d(3, 2, 3, stride=2, output_padding=1), x3),
        "ConvTranspose2d": (lambda: nn.ConvTranspose2d(3, 6, 3, groups=3), x4),
        "ConvTranspose3d": (lambda: nn.ConvTranspose3d(3, 2, 2), x5),
        "CosineEmbeddingLoss": (lambda: nn.CosineEmbeddingLoss(margin=0.2), lambda: (r(4, 3), r(4, 3), torch.tensor([1, -1, 1, -1]))),
        "CosineSimilarity": (lambda: nn.CosineSimilarity(dim=1), lambda: (r(4, 3), r(4, 3))),
        "CrossEntropyLoss": (lambda: nn.CrossEntropyLoss(weight=torch.rand(3), label_smoothing=0.1, ignore_index=1),
                             lambda: (r(4, 3), torch.tensor([0, 1, 2, 0]))),
        "CrossMapLRN2d": (lambda: nn.CrossMapLRN2d(3), x4),
        "Dropout": (lambda: nn.Dropout(0.3), x3),
        "Dropout1d": (lambda: nn.Dropout1d(0.3), x3),
        "Dropout2d": (lambda: nn.Dropout2d(0.3), x4),
        "Dropout3d": (lambda: nn.Dropout3d(0.3), x5),
        "ELU": (lambda: nn.ELU(0.7), x3),
        "Embedding": (lambda: nn.Embedding(10, 3, padding_idx=0, max_norm=1.0), lambda: (idx(10),)),
        "EmbeddingBag": (lambda: nn.EmbeddingBag(10, 3, mode="max"), lambda: (idx(10),)),
        "FeatureAlphaDropout": (lambda: nn.FeatureAlphaDropout(0.2), x4),
        "Flatten": (lambda: nn.Flatten(1, 2), x4),
        "Fold": (lambda: nn.Fold((4, 5), (2, 2)), lambda: (r(1, 12, 12),)),
        "FractionalMaxPool2d": (lambda: nn.FractionalMaxPool2d(2, output_size=(4, 4)), x4),
        "FractionalMaxPool3d": (lambda: nn.FractionalMaxPool3d(2, output_ratio=0.5), x5),
        "GELU": (lambda: nn.GELU(approximate="tanh"), x3),
        "GLU": (lambda: nn.GLU(1), lambda: (r(2, 4),)),
        "GRU": (lambda: nn.GRU(3, 4, num_layers=2, dropout=0.0), lambda: (r(5, 2, 3),)),
        "GRUCell": (lambda: nn.GRUCell(3, 4), lambda: (r(2, 3),)),
        "GaussianNLLLoss": (lambda: nn.GaussianNLLLoss(full=True), lambda: (r(4, 2), r(4, 2), torch.rand(4, 2) + 0.1)),
        "GroupNorm": (lambda: nn.GroupNorm(3, 6), lambda: (r(2, 6, 4),)),
        "Hardshrink": (lambda: nn.Hardshrink(0.3), x3),
        "Hardsigmoid": (lambda: nn.Hardsigmoid(), x3),
        "Hardswish": (lambda: nn.Hardswish(), x3),
        "Hardtanh": (lambda: nn.Hardtanh(-0.5, 0.5), x3),
        "HingeEmbeddingLoss": (lambda: nn.HingeEmbeddingLoss(0.5), lambda: (r(4), torch.tensor([1.0, -1.0, 1.0, -1.0]))),
        "HuberLoss": (lambda: nn.HuberLoss(delta=0.5), lambda: (r(4), r(4))),
        "Identity": (lambda: nn.Identity(3, unused="x"), x3),
        "InstanceNorm1d": (lambda: nn.InstanceNorm1d(3, affine=True, track_running_stats=True), x3),
        "InstanceNorm2d": (lambda: nn.InstanceNorm2d(3), x4),
        "InstanceNorm3d": (lambda: nn.InstanceNorm3d(3, affine=True), x5),
        "KLDivLoss": (lambda: nn.KLDivLoss(reduction="batchmean", log_target=True),
                      lambda: (r(4, 3).log_softmax(1), r(4, 3).log_softmax(1))),
        "L1Loss": (lambda: nn.L1Loss(reduction="sum"), lambda: (r(4), r(4))),
        "LPPool1d": (lambda: nn.LPPool1d(2, 3), x3),
        "LPPool2d": (lambda: nn.LPPool2d(1.5, 2), x4),
        "LPPool3d": (lambda: nn.LPPool3d(2, 2), x5),
        "LSTM": (lambda: nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True, proj_size=2), lambda: (r(2, 5, 3),)),
        "LSTMCell": (lambda: nn.LSTMCell(3, 4, bias=False), lambda: (r(2, 3),)),
        "LayerNorm": (lambda: nn.LayerNorm((3, 8), elementwise_affine=True), x3),
        "LeakyReLU": (lambda: nn.LeakyReLU(0.2), x3),
        "Linear": (lambda: nn.Linear(8, 2), x3),
        "LocalResponseNorm": (lambda: nn.LocalResponseNorm(2), x4),
        "LogSigmoid": (lambda: nn.LogSigmoid(), x3),
        "LogSoftmax": (lambda: nn.LogSoftmax(dim=1), x3),
        "MSELoss": (lambda: nn.MSELoss(), lambda: (r(4), r(4))),
        "MarginRankingLoss": (lambda: nn.MarginRankingLoss(0.1), lambda: (r(4), r(4), torch.tensor([1.0, -1.0, 1.0, 1.0]))),
        "MaxPool1d": (lambda: nn.MaxPool1d(2, return_indices=True), x3),
        "MaxPool2d": (lambda: nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), x4),
        "MaxPool3d": (lambda: nn.MaxPool3d(2, dilation=1), x5),
        "MaxUnpool1d": (lambda: nn.MaxUnpool1d(2), lambda: nn.MaxPool1d(2, return_indices=True)(r(1, 2, 8))),
        "MaxUnpool2d": (lambda: nn.MaxUnpool2d(2), lambda: nn.MaxPool2d(2, return_indices=True)(r(1, 2, 4, 4))),
        "MaxUnpool3d": (lambda: nn.MaxUnpool3d(2), lambda: nn.MaxPool3d(2, return_indices=True)(r(1, 2, 4, 4, 4))),
        "Mish": (lambda: nn.Mish(), x3),
        "Module": (lambda: nn.Module(), None),
        "ModuleDict": (lambda: nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.ReLU()}), None),
        "ModuleList": (lambda: nn.ModuleList([nn.Linear(2, 2), nn.Tanh()]), None),
        "MultiLabelMarginLoss": (lambda: nn.MultiLabelMarginLoss(), lambda: (r(2, 4), torch.tensor([[3, 0, -1, 1], [0, 1, 2, 3]]))),
        "MultiLabelSoftMarginLoss": (lambda: nn.MultiLabelSoftMarginLoss(weight=torch.rand(4)), lambda: (r(2, 4), torch.rand(2, 4).round())),
        "MultiMarginLoss": (lambda: nn.MultiMarginLoss(p=2, weight=torch.rand(3)), lambda: (r(4, 3), torch.tensor([0, 1, 2, 1]))),
        "MultiheadAttention": (lambda: nn.MultiheadAttention(4, 2, kdim=3, vdim=5, dropout=0.0),
                               lambda: (r(6, 2, 4), r(7, 2, 3), r(7, 2, 5))),
        "NLLLoss": (lambda: nn.NLLLoss(weight=torch.rand(3)), lambda: (r(4, 3).log_softmax(1), torch.tensor([0, 1, 2, 1]))),
        "NLLLoss2d": (lambda: nn.NLLLoss2d(), lambda: (r(2, 3, 2, 2).log_softmax(1), torch.zeros(2, 2, 2, dtype=torch.long))),
        "NonDynamicallyQuantizableLinear": (lambda: nn.modules.linear.NonDynamicallyQuantizableLinear(8, 3), x3),
        "PReLU": (lambda: nn.PReLU(3), x3),
        "PairwiseDistance": (lambda: nn.PairwiseDistance(p=1.0, keepdim=True), lambda: (r(4, 3), r(4, 3))),
        "ParameterDict": (lambda: nn.ParameterDict({"a": nn.Parameter(torch.ones(2)), "b": nn.Parameter(torch.zeros(3))}), None),
        "ParameterList": (lambda: nn.ParameterList([nn.Parameter(torch.ones(2)), nn.Parameter(torch.zeros(3))]), None),
        "PixelShuffle": (lambda: nn.PixelShuffle(2), lambda: (r(1, 4, 2, 2),)),
        "PixelUnshuffle": (lambda: nn.PixelUnshuffle(2), x4),
        "PoissonNLLLoss": (lambda: nn.PoissonNLLLoss(log_input=False, full=True), lambda: (torch.rand(4) + 0.1, torch.rand(4) * 3)),
        "RMSNorm": (lambda: nn.RMSNorm(8, eps=1e-5), x3),
        "RNN": (lambda: nn.RNN(3, 4, nonlinearity="relu", bias=False), lambda: (r(5, 2, 3),)),
        "RNNCell": (lambda: nn.RNNCell(3, 4, nonlinearity="tanh"), lambda: (r(2, 3),)),
        "RReLU": (lambda: nn.RReLU(0.1, 0.3), x3),
        "ReLU": (lambda: nn.ReLU(), x3),
        "ReLU6": (lambda: nn.ReLU6(), x3),
        "ReflectionPad1d": (lambda: nn.ReflectionPad1d(2), x3),
        "ReflectionPad2d": (lambda: nn.ReflectionPad2d((1, 1, 2, 0)), x4),
        "ReflectionPad3d": (lambda: nn.ReflectionPad3d(1), x5),
        "ReplicationPad1d": (lambda: nn.ReplicationPad1d(2), x3),
        "ReplicationPad2d": (lambda: nn.ReplicationPad2d(1), x4),
        "ReplicationPad3d": (lambda: nn.ReplicationPad3d(1), x5),
        "SELU": (lambda: nn.SELU(), x3),
        "Sequential": (lambda: nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2))), x3),
        "SiLU": (lambda: nn.SiLU(), x3),
        "Sigmoid": (lambda: nn.Sigmoid(), x3),
        "SmoothL1Loss": (lambda: nn.SmoothL1Loss(beta=0.5), lambda: (r(4), r(4))),
        "SoftMarginLoss": (lambda: nn.SoftMarginLoss(), lambda: (r(4), torch.tensor([1.0, -1.0, 1.0, -1.0]))),
        "Softmax": (lambda: nn.Softmax(dim=-1), x3),
        "Softmax2d": (lambda: nn.Softmax2d(), x4),
        "Softmin": (lambda: nn.Softmin(dim=1), x3),
        "Softplus": (lambda: nn.Softplus(beta=2.0, threshold=10.0), x3),
        "Softshrink": (lambda: nn.Softshrink(0.2), x3),
        "Softsign": (lambda: nn.Softsign(), x3),
        "SyncBatchNorm": (lambda: nn.SyncBatchNorm(3), x4),
        "Tanh": (lambda: nn.Tanh(), x3),
        "Tanhshrink": (lambda: nn.Tanhshrink(), x3),
        "Threshold": (lambda: nn.Threshold(0.1, 20.0), x3),
        "Transformer": (lambda: nn.Transformer(4, 2, 1, 1, 8, dropout=0.0), lambda: (r(5, 2, 4), r(3, 2, 4))),
        "TransformerDecoder": (lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2, 8, dropout=0.0), 2, norm=nn.LayerNorm(4)),
                               lambda: (r(3, 2, 4), r(5, 2, 4))),
        "TransformerDecoderLayer": (lambda: nn.TransformerDecoderLayer(4, 2, 8, dropout=0.0, norm_first=True), lambda: (r(3, 2, 4), r(5, 2, 4))),
        "TransformerEncoder": (lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True), 2,
                                                             enable_nested_tensor=False), lambda: (r(2, 5, 4),)),
        "TransformerEncoderLayer": (lambda: nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, activation=F.gelu), lambda: (r(5, 2, 4),)),
        "TripletMarginLoss": (lambda: nn.TripletMarginLoss(margin=0.5, p=1.0), lambda: (r(4, 3), r(4, 3), r(4, 3))),
        "TripletMarginWithDistanceLoss": (lambda: nn.TripletMarginWithDistanceLoss(distance_function=nn.PairwiseDistance(), margin=0.5),
                                          lambda: (r(4, 3), r(4, 3), r(4, 3))),
        "Unflatten": (lambda: nn.Unflatten(2, (2, 4)), x3),
        "Unfold": (lambda: nn.Unfold(2, stride=2), x4),
        "Upsample": (lambda: nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), x4),
        "UpsamplingBilinear2d": (lambda: nn.UpsamplingBilinear2d(scale_factor=2), x4),
        "UpsamplingNearest2d": (lambda: nn.UpsamplingNearest2d(size=(5, 5)), x4),
        "ZeroPad1d": (lambda: nn.ZeroPad1d(2), x3),
        "ZeroPad2d": (lambda: nn.ZeroPad2d((1, 0, 2, 1)), x4),
        "ZeroPad3d": (lambda: nn.ZeroPad3d(1), x5),
        "RNNBase": (lambda: nn.RNNBase("LSTM", 3, 4), None),
        "RNNCellBase": (lambda: nn.RNNCellBase(3, 4, True, 2), None),
        "LinearCrossEntropyLoss": (lambda: nn.LinearCrossEntropyLoss(4, 3, weight=torch.rand(3), bias=True),
                                   lambda: (r(5, 4), torch.tensor([0, 1, 2, 0, 1]))),
    }


LEARNER = """
import copy, torch
def forward(m, *x):
    torch.manual_seed(0)
    return m(*x)
def same(m):
    return m
def copied(m):
    return copy.deepcopy(m)
def change(m):
    m.eval()
    for name, p in list(m.named_parameters(recurse=False))[:1]:
        with torch.no_grad():
            p.add_(1)
        setattr(m, name, torch.nn.Parameter(p.detach() * 2, requires_grad=p.requires_grad))
"""
TEST = """
torch.manual_seed(1)
m = MAKE()
x = INPUT() if INPUT is not None else None
R = {}
if x is not None:
    R["forward"] = forward(m, *x)
R["state"] = {k: v.clone() for k, v in m.state_dict().items()}
R["same"] = same(m) is m
c = copied(m)
R["copy"] = (type(c) is type(m), {k: v.clone() for k, v in c.state_dict().items()})
if x is not None:
    torch.manual_seed(0)
    R["copy_forward"] = c(*x)
change(m)
R["training"] = m.training
R["params"] = [(n, tuple(p.shape), p.dtype, p.requires_grad) for n, p in m.named_parameters()]
R["changed"] = {k: v.clone() for k, v in m.state_dict().items()}
if x is not None:
    torch.manual_seed(0)
    R["after"] = m(*x)
"""


def differences(a, b, path="R") -> list[str]:
    if isinstance(a, torch.Tensor):
        ok = (isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
              and torch.equal(a.detach().nan_to_num(), b.detach().nan_to_num()))
        return [] if ok else [path]
    if isinstance(a, (tuple, list)):
        if type(a) is not type(b) or len(a) != len(b):
            return [f"{path}: {type(a).__name__} != {type(b).__name__}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, dict):
        if list(a) != list(b):
            return [f"{path}: keys"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}[{k!r}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def test_every_module_class_of_torch_nn_is_built_here_or_listed_as_unable_to_go():
    classes = set(torch_nn_classes())
    assert classes == set(zoo()) | set(CANNOT_GO), (sorted(classes - set(zoo()) - set(CANNOT_GO)),
                                                   sorted(set(zoo()) - classes))
    assert not set(zoo()) & set(CANNOT_GO)


@pytest.mark.parametrize("name", sorted(zoo()))
def test_a_module_of_torch_nn_goes_to_the_learners_function_and_behaves_as_in_one_process(name):
    make, inputs = zoo()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # deprecations of the classes themselves (Container, NLLLoss2d)
        here = {"MAKE": make, "INPUT": inputs}
        exec(LEARNER, here)
        exec("import torch\n" + TEST, here)
        judge = Judge(kernel(LEARNER))
        judge.run_cell("pass")
        judge.namespace.update(MAKE=make, INPUT=inputs)
        errors = errors_of(judge.run_cell(TEST))
    assert not errors, errors[0]["evalue"]
    assert type(judge.namespace["m"]) is torch_nn_classes()[name]
    assert not differences(here["R"], judge.namespace["R"]), differences(here["R"], judge.namespace["R"])


@pytest.mark.parametrize("name", sorted(CANNOT_GO))
def test_a_module_that_cannot_go_is_refused_naming_its_class_and_what_to_do(name):
    cls = torch_nn_classes()[name]
    judge = Judge(kernel("def f(m):\n    return 1\n"))
    judge.run_cell("pass")
    judge.namespace["MAKE"] = lambda: cls(3) if "Linear" in name else cls(2, 3) if "Conv" in name else cls()
    errors = errors_of(judge.run_cell("f(MAKE())"))
    assert errors and errors[0]["ename"] == "JudgeError", errors
    assert name in errors[0]["evalue"] and "run it once on an input" in errors[0]["evalue"], errors[0]["evalue"]
