# The same bundle baked into a local disk image with the qemu builder (copy and adapt; HCL2,
# packer >= 1.6.6). The order of steps is the one of gpu-amazon-ebs.pkr.hcl: the NVIDIA packages,
# the bundle (file provisioner), `install.sh --image-build --strict` (shell provisioner).
#
# goldtune's own CI runs this template with `packer build` (tests/boot/test_packer.py): a raw
# Debian 12 root filesystem booted with -kernel/-initrd through qemuargs, install_flags
# "--image-build" (its image has no NVIDIA packages), then the built image is booted and
# `gen verify` checks it. A cloud image (qcow2 with a boot loader) needs no qemuargs.
packer {
  required_version = ">= 1.6.6"
}

variable "base_image" {
  type        = string
  description = "A disk image with an SSH server and a build user (or cloud-init to make one)."
  default     = "debian-12-genericcloud-amd64.qcow2"
}

variable "base_image_checksum" {
  type    = string
  default = "none"
}

variable "format" {
  type    = string
  default = "qcow2"
}

variable "bundle_dir" {
  type    = string
  default = "bundles/l40s-4x-pcie-inference"
}

variable "install_flags" {
  type    = string
  default = "--image-build --strict"
}

variable "driver_install" {
  type    = list(string)
  default = ["echo 'install the NVIDIA driver packages here' >&2; exit 1"]
}

variable "ssh_username" {
  type    = string
  default = "debian"
}

variable "ssh_private_key_file" {
  type    = string
  default = "build-key"
}

variable "accelerator" {
  type    = string
  default = "kvm"
}

variable "qemuargs" {
  type        = list(list(string))
  description = "Extra QEMU arguments, e.g. -kernel/-initrd/-append for an image without a boot loader."
  default     = []
}

variable "output_directory" {
  type    = string
  default = "output-gpu-qemu"
}

source "qemu" "gpu" {
  iso_url              = var.base_image
  iso_checksum         = var.base_image_checksum
  disk_image           = true
  format               = var.format
  skip_resize_disk     = true
  accelerator          = var.accelerator
  headless             = true
  memory               = 2048
  cpus                 = 2
  qemuargs             = var.qemuargs
  ssh_username         = var.ssh_username
  ssh_private_key_file = var.ssh_private_key_file
  ssh_timeout          = "20m"
  shutdown_command     = "sudo shutdown -P now"
  shutdown_timeout     = "10m"
  output_directory     = var.output_directory
  vm_name              = "gpu-golden.img"
}

build {
  sources = ["source.qemu.gpu"]

  provisioner "shell" {
    execute_command = "sudo sh -eu -c '{{ .Vars }} {{ .Path }}'"
    inline          = var.driver_install
  }

  provisioner "shell" {
    inline = ["rm -rf /tmp/goldtune-bundle", "mkdir -p /tmp/goldtune-bundle"]
  }
  provisioner "file" {
    source      = "${var.bundle_dir}/"
    destination = "/tmp/goldtune-bundle"
  }

  provisioner "shell" {
    execute_command = "sudo sh -eu -c '{{ .Vars }} {{ .Path }}'"
    inline = [
      "sh /tmp/goldtune-bundle/install.sh --check",
      "sh /tmp/goldtune-bundle/install.sh ${var.install_flags}",
      "rm -rf /tmp/goldtune-bundle",
    ]
  }
}
