# A GPU AMI with a goldtune bundle baked in (copy and adapt). For the current Packer release
# line: `packer init .` installs the amazon plugin named in required_plugins, then
#   packer validate .
#   packer build -var bundle_dir=bundles/p5-node-serving -var 'driver_install=["…"]' .
#
# Order of steps:
#   1. CI generates the bundle, and the bundle is reviewed (EXPLAIN.md, plan.json) before any
#      image is built from it:
#        gen --hw hardware/p5-node.yaml --profile profiles/serving.yaml -o bundles/p5-node-serving
#   2. The NVIDIA driver (nvidia-smi, nvidia-persistenced) and, on NVSwitch machines, fabric
#      manager are installed BEFORE install.sh (the first shell provisioner): install.sh enables
#      their units, and --strict fails the build, naming what is missing, when they are not there.
#   3. A file provisioner uploads the bundle directory.
#   4. A shell provisioner runs `install.sh --image-build --strict`. The build instance is a
#      running systemd system, so without --image-build install.sh would take the live path and
#      start the NVIDIA daemons, which fails without a GPU. In image-build mode it installs the
#      files, enables/disables/masks units without starting them, regenerates grub.cfg with the
#      bundle's kernel arguments when the image has update-grub (Ubuntu; RHEL-like: its BLS
#      entries are edited), and prints what is deferred to the first boot.
#   5. Packer stops the instance and registers the AMI; the first boot applies everything.
# Any instance type works for the build: image-build mode needs no GPU.
#
# `packer validate .` passes with the defaults below (no AWS access: credentials and the source
# AMI are resolved by `packer build`). The variables marked "Must be set" have placeholder
# defaults that a build stops on, with a message.
packer {
  # required_plugins and `packer init` came with Packer 1.7.0.
  required_version = ">= 1.7.0"
  required_plugins {
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = "~> 1.8"
    }
  }
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "bundle_dir" {
  type        = string
  description = "Must be set: the goldtune bundle directory generated in CI (it holds install.sh); the default is a placeholder."
  default     = "bundles/p5-node-serving"
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
    error_message = "The install_flags variable must hold --image-build: the build instance has no GPU, and the live path would start the NVIDIA daemons."
  }
}

variable "driver_install" {
  type        = list(string)
  description = "Must be set: the commands that install the NVIDIA driver and fabric manager (your repository, your version); the default stops the build with a message."
  default     = ["echo 'set driver_install: the commands that install the NVIDIA driver and fabric manager packages' >&2; exit 1"]
  validation {
    condition     = length(var.driver_install) > 0
    error_message = "The driver_install variable must hold at least one command: install.sh --strict needs the NVIDIA packages in the image."
  }
}

variable "source_ami_name" {
  type    = string
  default = "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-*"
}

source "amazon-ebs" "gpu" {
  region        = var.region
  instance_type = "m7i.large"
  ssh_username  = "ubuntu"
  ami_name      = "gpu-golden-{{timestamp}}"
  source_ami_filter {
    filters = {
      name                = var.source_ami_name
      virtualization-type = "hvm"
      root-device-type    = "ebs"
    }
    owners      = ["099720109477"] # Canonical
    most_recent = true
  }
}

build {
  sources = ["source.amazon-ebs.gpu"]

  # Step 2: the NVIDIA packages first.
  provisioner "shell" {
    execute_command = "sudo sh -eu -c '{{ .Vars }} {{ .Path }}'"
    inline          = var.driver_install
  }

  # Step 3: the bundle.
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

  # Step 4: install in image-build mode.
  provisioner "shell" {
    execute_command = "sudo sh -eu -c '{{ .Vars }} {{ .Path }}'"
    inline = [
      "sh /tmp/goldtune-bundle/install.sh --check",
      "sh /tmp/goldtune-bundle/install.sh ${var.install_flags}",
      "rm -rf /tmp/goldtune-bundle",
    ]
  }
}
