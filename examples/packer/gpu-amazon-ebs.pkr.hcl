# A GPU AMI with a goldtune bundle baked in (copy and adapt; HCL2, packer >= 1.6.6).
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
packer {
  required_version = ">= 1.6.6"
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "bundle_dir" {
  type        = string
  description = "The goldtune bundle directory generated in CI (it holds install.sh)."
  default     = "bundles/p5-node-serving"
}

variable "install_flags" {
  type        = string
  description = "install.sh's flags: image build, and fail when the image lacks what the plan needs."
  default     = "--image-build --strict"
}

variable "driver_install" {
  type        = list(string)
  description = "Commands that install the NVIDIA driver and fabric manager (your repository, your version)."
  default     = ["echo 'install the NVIDIA driver and fabric manager packages here' >&2; exit 1"]
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
