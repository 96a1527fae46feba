"""torchvision's detection, segmentation, optical-flow and video models in inference under
ember: graphs and breaks (ember.explain), and whether two compiled calls equal eager's outputs.
Random weights, nothing downloaded. With --dynamo, TorchDynamo's graphs and breaks instead
(torch._dynamo.explain) for the README's side-by-side counts.

    PYTHONPATH=. python tools/tv_models.py [name,name,...] [--dynamo]
"""
import torch, torchvision, warnings, ember, ember.testing, sys, time
warnings.simplefilter("ignore")
import torch._dynamo as D
M = torchvision.models
cases = {
 "fasterrcnn_mobilenet_v3_large_320_fpn": lambda: M.detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=5),
 "retinanet_resnet50_fpn": lambda: M.detection.retinanet_resnet50_fpn(weights=None, weights_backbone=None, num_classes=5),
 "ssdlite320_mobilenet_v3_large": lambda: M.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=5),
 "fcos_resnet50_fpn": lambda: M.detection.fcos_resnet50_fpn(weights=None, weights_backbone=None, num_classes=5),
 "maskrcnn_resnet50_fpn": lambda: M.detection.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=5),
 "keypointrcnn_resnet50_fpn": lambda: M.detection.keypointrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=2),
 "deeplabv3_mobilenet_v3_large": lambda: M.segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=5, aux_loss=False),
 "lraspp_mobilenet_v3_large": lambda: M.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=5),
 "fcn_resnet50": lambda: M.segmentation.fcn_resnet50(weights=None, weights_backbone=None, num_classes=5, aux_loss=False),
 "raft_small": lambda: M.optical_flow.raft_small(weights=None),
 "r3d_18": lambda: M.video.r3d_18(weights=None),
 "s3d": lambda: M.video.s3d(weights=None),
 "mvit_v1_b": lambda: M.video.mvit_v1_b(weights=None),
 "swin3d_t": lambda: M.video.swin3d_t(weights=None),
}
def inputs(n):
    g = torch.Generator().manual_seed(0)
    if "rcnn" in n or "retina" in n or "ssd" in n or "fcos" in n:
        return ([torch.rand(3, 128, 160, generator=g), torch.rand(3, 96, 128, generator=g)],)
    if n == "raft_small":
        return (torch.rand(1, 3, 128, 128, generator=g), torch.rand(1, 3, 128, 128, generator=g))
    if n in ("r3d_18", "s3d"):
        return (torch.rand(1, 3, 8, 64, 64, generator=g),)
    if n in ("mvit_v1_b",):
        return (torch.rand(1, 3, 16, 224, 224, generator=g),)
    if n == "swin3d_t":
        return (torch.rand(1, 3, 8, 64, 64, generator=g),)
    return (torch.rand(1, 3, 96, 96, generator=g),)
def flat(o):
    if isinstance(o, torch.Tensor): return [o]
    if isinstance(o, dict): return [t for v in o.values() for t in flat(v)]
    if isinstance(o, (list, tuple)): return [t for v in o for t in flat(v)]
    return []
args_ = [a for a in sys.argv[1:] if not a.startswith("--")]
names = args_[0].split(",") if args_ else list(cases)
dyn = "--dynamo" in sys.argv
for n in names:
    try:
        torch.manual_seed(0)
        m = cases[n]().eval()
        args = inputs(n)
        with torch.no_grad():
            want = m(*args)
            if dyn:
                D.reset(); t0 = time.time()
                ex = D.explain(m)(*args)
                print(n, "dynamo graphs", ex.graph_count, "breaks", ex.graph_break_count, f"{time.time()-t0:.1f}s", flush=True)
                continue
            ember.reset(); t0 = time.time()
            ex = ember.explain(m)(*args)
            cm = ember.compile(m)
            got = cm(*args); got = cm(*args)
        fw, fg = flat(want), flat(got)
        ok = len(fw) == len(fg) and all(a.shape == b.shape and torch.allclose(a, b, atol=1e-3, rtol=1e-3) for a, b in zip(fw, fg))
        seen = []
        for r in ex.break_reasons:
            r = str(r).split("inside it, at ")[-1][:160]
            if r not in seen: seen.append(r)
        print(n, "graphs", ex.graph_count, "breaks", ex.graph_break_count, "ok", ok, f"{time.time()-t0:.1f}s", seen[:4], flush=True)
    except Exception as e:
        print(n, "ERROR", type(e).__name__, str(e)[:300], flush=True)
