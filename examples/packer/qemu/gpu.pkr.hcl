# The same bundle baked into a local disk image with the qemu builder (copy and adapt). For the
# current Packer release line: `packer init .` installs the qemu plugin named in
# required_plugins, then
#   packer validate .
#   packer build -var base_image=… -var base_image_checksum=sha256:… \
#                -var bundle_dir=bundles/l40s-4x-pcie-inference -var 'driver_install=["…"]' .
# ../qemu-packer-1.6/ is this template for Debian's Packer 1.6.6 (no required_plugins, which
# 1.6.6 rejects); the two differ only in their packer block. The order of steps is the one of
# ../amazon-ebs/gpu.pkr.hcl: the NVIDIA packages, the bundle (file provisioner), `install.sh
# --image-build --strict` (shell provisioner).
#
# `packer validate .` passes with the defaults below. The variables marked "Must be set" have
# placeholder defaults that a build stops on. A cloud image (qcow2 with a boot loader) needs no
# qemuargs; a raw root filesystem boots with -kernel/-initrd/-append through them.
packer {
  # required_plugins and `packer init` came with Packer 1.7.0.
  required_version = ">= 1.7.0"
  required_plugins {
    qemu = {
      source  = "github.com/hashicorp/qemu"
      version = "~> 1.1"
    }
  }
}

variable "base_image" {
  type        = string
  description = "Must be set: a disk image (path or URL) with an SSH server and a build user (or cloud-init to make one); the default is a placeholder."
  default     = "debian-12-genericcloud-amd64.qcow2"
  validation {
    condition     = length(trimspace(var.base_image)) > 0
    error_message = "The base_image variable must be set to the disk image to start from."
  }
}

variable "base_image_checksum" {
  type        = string
  description = "The base image's checksum as the qemu builder takes it (sha256:HEX, file:URL, or none)."
  default     = "none"
  validation {
    condition     = regex_replace(var.base_image_checksum, "^(?:none|(?:md5|sha1|sha256|sha512|file):.+)$", "") != var.base_image_checksum
    error_message = "The base_image_checksum variable must be none, TYPE:HEX (md5, sha1, sha256, sha512) or file:URL."
  }
}

variable "format" {
  type    = string
  default = "qcow2"
  validation {
    condition     = contains(["qcow2", "raw"], var.format)
    error_message = "The format variable must be qcow2 or raw (the qemu builder's two formats)."
  }
}

variable "bundle_dir" {
  type        = string
  description = "Must be set: the goldtune bundle directory generated in CI (it holds install.sh); the default is a placeholder."
  default     = "bundles/l40s-4x-pcie-inference"
  validation {
    condition     = length(trimspace(var.bundle_dir)) > 0 && regex_replace(var.bundle_dir, "/$", "") == var.bundle_dir
    error_message = "The bundle_dir variable must be set to the bundle directory gen wrote (without a trailing /)."
  }
}

variable "install_flags" {
  type        = string
  description = "install.sh's flags: image build, and fail when the image lacks what the plan needs."
  default     = "--image-build --strict"
  validation {
    condition     = regex_replace(var.install_flags, "(?:^| )--image-build(?: |$)", "") != var.install_flags
    error_message = "The install_flags variable must hold --image-build: the build VM has no GPU, and the live path would start the NVIDIA daemons."
  }
}

variable "driver_install" {
  type        = list(string)
  description = "Must be set: the commands that install the NVIDIA driver packages (your repository, your version); the default stops the build with a message."
  default     = ["echo 'set driver_install: the commands that install the NVIDIA driver packages' >&2; exit 1"]
  validation {
    condition     = length(var.driver_install) > 0
    error_message = "The driver_install variable must hold at least one command (an image without NVIDIA packages: an echo, and install_flags without --strict)."
  }
}

variable "ssh_username" {
  type    = string
  default = "debian"
}

variable "ssh_private_key_file" {
  type        = string
  description = "The build user's private key; empty (the default): the keys of the running ssh-agent."
  default     = ""
}

variable "accelerator" {
  type    = string
  default = "kvm"
  validation {
    condition     = contains(["kvm", "tcg", "xen", "hax", "hvf", "whpx", "none"], var.accelerator)
    error_message = "The accelerator variable must be one the qemu builder takes: kvm, tcg, xen, hax, hvf, whpx or none."
  }
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
  ssh_private_key_file = var.ssh_private_key_file == "" ? null : var.ssh_private_key_file
  ssh_agent_auth       = var.ssh_private_key_file == ""
  ssh_timeout          = "20m"
  shutdown_command     = "sudo shutdown -P now"
  shutdown_timeout     = "10m"
  output_directory     = var.output_directory
  vm_name              = "gpu-golden.img"
}

build {
  sources = ["source.qemu.gpu"]

  # The NVIDIA packages first.
  provisioner "shell" {
    execute_command = "sudo sh -eu -c '{{ .Vars }} {{ .Path }}'"
    inline          = var.driver_install
  }

  # The bundle.
  provisioner "shell" {
    inline = ["rm -rf /tmp/goldtune-bundle", "mkdir -p /tmp/goldtune-bundle"]
  }
  provisioner "file" {
    source      = "${var.bundle_dir}/"
    destination = "/tmp/goldtune-bundle"
    # The bundle is looked for when it is uploaded, not by `packer validate`: the template
    # validates before CI has generated it (a missing directory still fails the build).
    generated = true
  }

  # install.sh in image-build mode.
  provisioner "shell" {
    execute_command = "sudo sh -eu -c '{{ .Vars }} {{ .Path }}'"
    inline = [
      "sh /tmp/goldtune-bundle/install.sh --check",
      "sh /tmp/goldtune-bundle/install.sh ${var.install_flags}",
      "rm -rf /tmp/goldtune-bundle",
    ]
  }
}
