"""OCI image layouts written into a tar by hand: archives of any architecture for tests, without podman."""

import hashlib
import io
import json
import tarfile

INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"


class Layout:
    """An OCI image layout written into a tar, blob by blob."""

    def __init__(self):
        self.blobs = {}

    def blob(self, document):
        data = json.dumps(document).encode()
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self.blobs[digest] = data
        return {"digest": digest, "size": len(data), "mediaType": document.get("mediaType", "")}

    def image(self, architecture):
        config = self.blob({"architecture": architecture, "os": "linux", "rootfs": {"type": "layers"}})
        return self.blob({"schemaVersion": 2, "mediaType": MANIFEST, "config": config, "layers": []})

    def write(self, path, manifests, prefix="", drop=()):
        with tarfile.open(path, "w") as tar:
            files = {"oci-layout": b'{"imageLayoutVersion": "1.0.0"}'}
            files["index.json"] = json.dumps({"schemaVersion": 2, "manifests": manifests}).encode()
            files |= {f"blobs/sha256/{d.split(':')[1]}": data for d, data in self.blobs.items() if d not in drop}
            for name, data in files.items():
                info = tarfile.TarInfo(prefix + name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return path
