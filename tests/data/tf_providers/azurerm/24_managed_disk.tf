provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "disk" {
  name     = "rg-disk"
  location = "westeurope"
}

resource "azurerm_managed_disk" "data" {
  name                 = "disk-data"
  location             = azurerm_resource_group.disk.location
  resource_group_name  = azurerm_resource_group.disk.name
  storage_account_type = "Premium_LRS"
  create_option        = "Empty"
  disk_size_gb         = 256

  tags = {
    backup = "daily"
  }
}

resource "azurerm_snapshot" "data" {
  name                = "snap-data"
  location            = azurerm_resource_group.disk.location
  resource_group_name = azurerm_resource_group.disk.name
  create_option       = "Copy"
  source_uri          = azurerm_managed_disk.data.id
}

resource "azurerm_storage_account" "diag" {
  name                     = "acmediskdiag"
  resource_group_name      = azurerm_resource_group.disk.name
  location                 = azurerm_resource_group.disk.location
  account_tier             = "Standard"
  account_replication_type = "LRS"

  network_rules {
    default_action = "Deny"
    bypass         = ["AzureServices"]
  }
}
