// The two tiny programs baked into local test images: the stand-in Trussium
// runtime and the pod sandbox ("pause") process. Standard library only.
module trussium.local/images

go 1.24
